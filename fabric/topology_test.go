package fabric

import (
	"strings"
	"testing"
)

func TestParseTopologyFixture(t *testing.T) {
	topo, _ := fattree(t)
	var switches, cas int
	for _, n := range topo.Nodes {
		switch n.Type {
		case Switch:
			switches++
		case CA:
			cas++
		}
	}
	if switches != 6 || cas != 8 {
		t.Fatalf("%d switches, %d CAs; want 6 and 8", switches, cas)
	}
	l4 := topo.Nodes[leaf4]
	if l4 == nil || l4.Name != "Leaf4" || l4.Ports != 8 || l4.LID != 14 || l4.LMC != 0 {
		t.Fatalf("Leaf4: %+v", l4)
	}
	if got := l4.Links[7]; got != (End{GUID: spine1, Port: 4}) {
		t.Errorf("Leaf4 port 7 links to %+v, want Spine1 port 4", got)
	}
	if got := l4.Links[2]; got != (End{GUID: h8, Port: 1}) {
		t.Errorf("Leaf4 port 2 links to %+v, want H8 port 1", got)
	}
	hca := topo.Nodes[h8]
	if hca == nil || hca.Name != "H8" || hca.EndPorts[1] != (EndPort{LID: 24, LMC: 1}) {
		t.Fatalf("H8: %+v", hca)
	}
	for lid, want := range map[uint16]End{24: {h8, 1}, 25: {h8, 1}, 2: {h1, 1}, 3: {h1, 1}, 14: {leaf4, 0}} {
		if got, _, ok := topo.owner(lid); !ok || got != want {
			t.Errorf("lid %d is %+v's, want %+v's", lid, got, want)
		}
	}
	if _, _, ok := topo.owner(26); ok {
		t.Error("lid 26 is nobody's in the fixture")
	}
}

func TestParseTopologyRejects(t *testing.T) {
	real := fixture(t, "ibnetdiscover.out")
	small := DefaultLimits()
	small.MaxNodes = 5
	tiny := DefaultLimits()
	tiny.MaxBytes = 1000
	for _, c := range []struct {
		name, in, want string
		lim            Limits
	}{
		{"empty", "", "no node", DefaultLimits()},
		{"not ibnetdiscover", "hello\nworld\n", "no node", DefaultLimits()},
		{"long line", "Switch 8 \"S-01\" # \"" + strings.Repeat("x", 5000) + "\"\n", "line 1: longer than 4096 bytes", DefaultLimits()},
		{"too many nodes", real, "more than 5 nodes", small},
		{"too big", real, "file larger than 1000 bytes", tiny},
		{"port before node", "[1]\t\"S-01\"[1]\n", "line 1: port line before any node", DefaultLimits()},
		{"bad port count", "Switch 999 \"S-01\"\n", "bad port count", DefaultLimits()},
		{"bad node id", "Switch 8 \"X-01\"\n", "bad node id", DefaultLimits()},
		{"port past count", "Ca 1 \"H-01\"\n[2](2)\t\"S-02\"[1]\n", "bad port number", DefaultLimits()},
		{"lmc 8", "Ca 1 \"H-01\"\n[1](2)\t\"S-02\"[1]\t# lid 4 lmc 8 \"x\" lid 1 4xSDR\n", "bad lid/lmc", DefaultLimits()},
		{"node twice", "Ca 1 \"H-01\"\n\nCa 1 \"H-01\"\n", "listed twice", DefaultLimits()},
		{"links disagree", strings.Replace(real, "[7]\t\"S-0000000000200000\"[4]", "[7]\t\"S-0000000000200000\"[3]", 1), "which links to", DefaultLimits()},
		{"lid twice", strings.Replace(real, "# lid 24 lmc 1", "# lid 22 lmc 1", 1), "lid 22 is both", DefaultLimits()},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseTopology(strings.NewReader(c.in), c.lim)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
		})
	}
}
