package wire

import "testing"

// A path's DLID inside the remote port's LMC range gives the key of that
// port's base LID, by the local port's LMC; a connection routed by GID,
// an LMC of 0 and an LMC past IBTA's 3 bits change nothing.
func TestLMCKeys(t *testing.T) {
	base := Conn{Host: "hostB", Local: Addr{GID: "fe80::2", LID: 8, LMC: 2, QPN: 18}, Remote: Addr{LID: 4, QPN: 17}}
	baseKey, _ := base.Keys()
	for _, c := range []struct {
		name string
		rlid uint16
		lmc  uint8
		glob bool
		same bool
	}{
		{"base LID", 8, 2, false, true},
		{"alias +1", 9, 2, false, true},
		{"alias +3", 11, 2, false, true},
		{"next port's range", 12, 2, false, false},
		{"alias, local LMC 0", 9, 0, false, false},
		{"alias, LMC 9 (hostile)", 9, 9, false, false},
		{"routed by GID", 9, 2, true, false},
	} {
		a := Conn{Host: "hostA", Global: c.glob, Local: Addr{GID: "fe80::1", LID: 4, LMC: c.lmc, QPN: 17}, Remote: Addr{LID: c.rlid, QPN: 18}}
		if c.glob {
			a.Remote.GID = "fe80::2"
		}
		_, r := a.Keys()
		if got := r == baseKey; got != c.same {
			t.Errorf("%s: remote key %v, hostB's key %v: same %v, want %v", c.name, r, baseKey, got, c.same)
		}
	}
}
