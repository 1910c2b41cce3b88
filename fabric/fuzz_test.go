package fabric

import (
	"strings"
	"testing"
)

// fuzzLimits are small, so the fuzzers reach the bounds.
func fuzzLimits() Limits {
	return Limits{MaxBytes: 64 << 10, MaxLine: 512, MaxNodes: 64, MaxPorts: 254, MaxEntries: 1 << 16}
}

// FuzzParseTopology: any input parses or fails with one line, never
// panics; what parses keeps its bounds and walks within MaxHops.
func FuzzParseTopology(f *testing.F) {
	f.Add(fixture(f, "ibnetdiscover.out"))
	f.Add(fixture(f, "fattree.net"))
	f.Add("Ca 1 \"H-01\"\n[1](2)\t\"S-02\"[1]\t# lid 4 lmc 1 \"x\" lid 1 4xSDR\n")
	lfts, err := ParseLFTs(strings.NewReader(fixture(f, "dump_lfts.out")), DefaultLimits())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) {
		lim := fuzzLimits()
		topo, err := ParseTopology(strings.NewReader(in), lim)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		if len(topo.Nodes) > lim.MaxNodes {
			t.Fatalf("%d nodes", len(topo.Nodes))
		}
		for _, n := range topo.Nodes {
			for p := range n.Links {
				if p < 1 || p > n.Ports {
					t.Fatalf("%s port %d of %d", n.GUID, p, n.Ports)
				}
			}
		}
		for _, lid := range []uint16{2, 3, 22, 25} {
			if r, err := Walk(topo, lfts, 2, lid); err == nil && len(r.Hops) > MaxHops {
				t.Fatalf("%d hops", len(r.Hops))
			}
		}
	})
}

// FuzzParseLFTs: any input parses or fails with one line, never panics;
// what parses answers within the unicast range.
func FuzzParseLFTs(f *testing.F) {
	for _, name := range []string{"dump_lfts.out", "ibroute-leaf1.out", "opensm-lfts.dump"} {
		f.Add(fixture(f, name))
	}
	f.Fuzz(func(t *testing.T, in string) {
		lim := fuzzLimits()
		lfts, err := ParseLFTs(strings.NewReader(in), lim)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		size := 0
		for _, l := range lfts {
			size += len(l.out)
			if p, ok := l.OutPort(MaxUnicastLID); ok && p > lim.MaxPorts {
				t.Fatalf("port %d", p)
			}
		}
		if size > lim.MaxEntries {
			t.Fatalf("%d entries", size)
		}
	})
}
