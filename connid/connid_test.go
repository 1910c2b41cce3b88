package connid

import (
	"strings"
	"testing"
)

func lids(ls ...uint16) []Addr {
	var out []Addr
	for _, l := range ls {
		out = append(out, LIDAddr(l))
	}
	return out
}

func gid(last byte) [16]byte {
	g := [16]byte{0xfe, 0x80}
	g[15] = last
	return g
}

func end(name string, qpn, dest uint32, paths, ports []Addr) End {
	return End{Name: name, QPN: qpn, DestQPN: dest, Paths: paths, Ports: ports}
}

// Ends that are one connection.
func TestMatchPairs(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b End
	}{
		{"primary paths both ways", end("x", 100, 200, lids(0x21), lids(0x11)), end("y", 200, 100, lids(0x11), lids(0x21))},
		{"an alternate leads there (the primary was reloaded elsewhere)",
			end("x", 100, 200, lids(0x99, 0x22), lids(0x11, 0x12)), end("y", 200, 100, lids(0x12), lids(0x21, 0x22))},
		{"global routes by GID", end("x", 7, 9, []Addr{GIDAddr(gid(2))}, []Addr{{LID: 1, GID: gid(1)}}),
			end("y", 9, 7, []Addr{GIDAddr(gid(1))}, []Addr{{LID: 2, GID: gid(2)}})},
		{"destination QPN equal to its own QPN, on two hosts", end("x", 100, 100, lids(0x21), lids(0x11)), end("y", 100, 100, lids(0x11), lids(0x21))},
		{"loopback between two HCAs of one host", end("h mlx5_0", 17, 18, lids(3), lids(1, 2)), end("h mlx5_1", 18, 17, lids(1), lids(3, 4))},
		{"loopback on one port", end("h mlx5_0/5", 5, 6, lids(1), lids(1)), end("h mlx5_0/6", 6, 5, lids(1), lids(1))},
	} {
		if why := Match(tc.a, tc.b); why != "" {
			t.Errorf("%s: not paired: %s", tc.name, why)
		}
		if why := Match(tc.b, tc.a); why != "" {
			t.Errorf("%s (swapped): not paired: %s", tc.name, why)
		}
	}
}

// Ends that must not pair, each with the reason it gives.
func TestMatchRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b End
		why  string
	}{
		{"QPNs agree but the paths lead to other hosts (identical nodes)",
			end("x", 100, 100, lids(0x31), lids(0x11)), end("y", 100, 100, lids(0x41), lids(0x21)), WhyElsewhere},
		{"criss-crossed: two QPs of one host pointing at the same peer",
			end("x/100", 100, 200, lids(0x21), lids(0x11)), end("x/200", 200, 100, lids(0x21), lids(0x11)), WhyElsewhere},
		{"the same QPN on two rails of one host, each to its own peer",
			end("x mlx5_0/100", 100, 100, lids(0x31), lids(0x11)), end("x mlx5_1/100", 100, 100, lids(0x41), lids(0x12)), WhyElsewhere},
		{"three hosts with colliding QPNs: the third one's path leads elsewhere",
			end("x", 100, 100, lids(0x21), lids(0x11)), end("z", 100, 100, lids(0x41), lids(0x31)), WhyElsewhere},
		{"one way only: b's paths lead to a, a's do not lead to b",
			end("x", 1, 2, lids(0x99), lids(0x11)), end("y", 2, 1, lids(0x11), lids(0x21)), WhyElsewhere},
		{"QPN one way only", end("x", 1, 2, lids(0x21), lids(0x11)), end("y", 2, 3, lids(0x11), lids(0x21)), WhyQPN},
		{"not connected", end("x", 1, 0, lids(0x21), lids(0x11)), end("y", 2, 1, lids(0x11), lids(0x21)), WhyNotConnected},
		{"no port address known (an older publisher)", end("x", 1, 2, lids(0x21), nil), end("y", 2, 1, lids(0x11), nil), WhyNoIdentity},
		{"no path seen loaded", end("x", 1, 2, nil, lids(0x11)), end("y", 2, 1, lids(0x11), lids(0x21)), WhyNoIdentity},
		{"LID 0 is no address", end("x", 1, 2, lids(0), lids(0)), end("y", 2, 1, lids(0), lids(0)), WhyNoIdentity},
		{"a multicast LID is no port's", end("x", 1, 2, lids(0xC001), lids(0xC001)), end("y", 2, 1, lids(0xC001), lids(0xC001)), WhyNoIdentity},
		{"a global path to another GID, its DLID the port's LID (a router's)",
			end("x", 1, 2, []Addr{{LID: 2, GID: gid(9)}}, []Addr{{LID: 1, GID: gid(1)}}),
			end("y", 2, 1, []Addr{GIDAddr(gid(1))}, []Addr{{LID: 2, GID: gid(2)}}), WhyElsewhere},
	} {
		for _, sw := range []bool{false, true} {
			a, b := tc.a, tc.b
			if sw {
				a, b = b, a
			}
			why := Match(a, b)
			if !strings.HasPrefix(why, tc.why) {
				t.Errorf("%s (swapped %v): %q, want %q", tc.name, sw, why, tc.why)
			}
		}
	}
}

func TestAddBoundsAndDedups(t *testing.T) {
	var as []Addr
	for _, l := range []uint16{1, 1, 0, 2, 3, 4} {
		as = Add(as, LIDAddr(l), 3)
	}
	if len(as) != 3 || as[0].LID != 1 || as[2].LID != 3 {
		t.Fatalf("%v", as)
	}
}

// A port with LMC n answers to the 2^n LIDs from its base LID: a path
// leads to it by any of them, and by no LID outside the range.
func TestLeadsWithinLMC(t *testing.T) {
	port := PortLID(0x20, 2) // 0x20..0x23
	for lid, want := range map[uint16]bool{0x1f: false, 0x20: true, 0x21: true, 0x23: true, 0x24: false} {
		if got := LIDAddr(lid).Leads(port); got != want {
			t.Errorf("lid 0x%x leads to %s: %v, want %v", lid, port, got, want)
		}
	}
	if LIDAddr(0x21).Leads(LIDAddr(0x20)) {
		t.Error("LMC 0 (an older recording's port): lid 0x21 leads to lid 0x20")
	}
	if PortLID(0x20, 9) != LIDAddr(0x20) {
		t.Error("an LMC past 7 is not taken as 0")
	}
	if top := PortLID(0xBFFE, 7); !LIDAddr(0xBFFF).Leads(top) || LIDAddr(0xC000).Leads(top) {
		t.Error("an LMC range past the unicast LIDs leads to multicast")
	}
	// two hosts with LMC 2 whose connection runs on non-base LIDs
	a := end("a", 100, 200, lids(0x11, 0x15), []Addr{PortLID(0x20, 2), PortLID(0x24, 2)})
	b := end("b", 200, 100, lids(0x21, 0x26), []Addr{PortLID(0x10, 2), PortLID(0x14, 2)})
	if why := Match(a, b); why != "" {
		t.Errorf("not paired: %s", why)
	}
	if s := PortLID(0x20, 2).String(); s != "lid 0x20-0x23" {
		t.Errorf("port string %q", s)
	}
}
