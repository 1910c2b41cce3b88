package fabric

import (
	"fmt"
	"strings"
	"testing"
)

func hopsOf(r Route) string {
	var s []string
	for _, h := range r.Hops {
		s = append(s, fmt.Sprintf("%s:%d>%d", h.Name, h.InPort, h.OutPort))
	}
	return strings.Join(s, " ")
}

// The routes below are read by hand in dump_lfts.out: Leaf1 sends 0x16 out
// of 7 (Spine1's port 1) and 0x17 out of 8 (Spine2's port 1), both spines
// send 0x16-0x19 out of 4 (Leaf4's ports 7 and 8), Leaf4 sends 0x16 and
// 0x17 out of 1 (H7) and 0x19 out of 2 (H8). Leaf1 sends 0x19 out of 7.
func TestWalkFixture(t *testing.T) {
	topo, lfts := fattree(t)
	for _, c := range []struct {
		from, to uint16
		bits     uint8
		dst      PortRef
		hops     string
	}{
		{2, 22, 0, PortRef{h7, "H7", 1}, "Leaf1:1>7 Spine1:1>4 Leaf4:7>1"},
		{3, 23, 1, PortRef{h7, "H7", 1}, "Leaf1:1>8 Spine2:1>4 Leaf4:8>1"},
		{2, 25, 0, PortRef{h8, "H8", 1}, "Leaf1:1>7 Spine1:1>4 Leaf4:7>2"},
		{2, 14, 0, PortRef{leaf4, "Leaf4", 0}, "Leaf1:1>7 Spine1:1>4 Leaf4:7>0"},
		{6, 2, 0, PortRef{h1, "H1", 1}, "Leaf1:0>1"},
		{2, 3, 0, PortRef{h1, "H1", 1}, ""},
	} {
		r, err := Walk(topo, lfts, c.from, c.to)
		if err != nil {
			t.Fatalf("%d -> %d: %v", c.from, c.to, err)
		}
		if got := hopsOf(r); got != c.hops || r.Destination != c.dst || r.PathBits != c.bits {
			t.Errorf("%d -> %d: %q to %+v bits %d; want %q to %+v bits %d", c.from, c.to, got, r.Destination, r.PathBits, c.hops, c.dst, c.bits)
		}
	}
}

func TestWalkFails(t *testing.T) {
	topo, _ := fattree(t)
	real := fixture(t, "dump_lfts.out")
	withoutLeaf4 := real[:strings.Index(real, "Unicast")] + real[strings.Index(real, "Unicast lids [0x0-0x19] of switch DR path slid 0; dlid 0; 0,1,7,3"):]
	for _, c := range []struct {
		name     string
		dump     string
		from, to uint16
		want     string
	}{
		{"unknown source", real, 7, 22, "source lid 7 is no port's"},
		{"unknown destination", real, 2, 30, "destination lid 30 is no port's"},
		{"no table", withoutLeaf4, 2, 22, `switch "Leaf4" (0x0000000000200005) has no forwarding table`},
		{"no entry", editSwitch(t, real, "Spine1", "0016", ""), 2, 22, `switch "Spine1" (0x0000000000200000) has no forwarding entry for lid 22`},
		{"loop", editSwitch(t, real, "Spine1", "0016", "001"), 2, 22, `loops: it enters "Leaf1"`},
		{"wrong port", editSwitch(t, real, "Leaf4", "0016", "002"), 2, 22, `ends at "H8" (0x000000000010000e) port 1, not at the port of lid 22`},
		{"unlinked port", editSwitch(t, real, "Leaf1", "0016", "005"), 2, 22, "out of port 5, which is not linked"},
		{"not its own", editSwitch(t, real, "Leaf4", "0016", "000"), 2, 22, "takes lid 22 for its own"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lfts, err := ParseLFTs(strings.NewReader(c.dump), DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			_, err = Walk(topo, lfts, c.from, c.to)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}

// chain is a line of n switches, H1 at the first, H2 at the last, each
// switch forwarding H2's LID onwards.
func chain(n int) (topo, lfts string) {
	var tb, lb strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&tb, "Switch\t3 \"S-%016x\"\t\t# \"sw%d\" base port 0 lid %d lmc 0\n", i, i, 100+i)
		if i > 1 {
			fmt.Fprintf(&tb, "[1]\t\"S-%016x\"[2]\n", i-1)
		} else {
			tb.WriteString("[1]\t\"H-00000000000000a1\"[1](a2)\n")
		}
		if i < n {
			fmt.Fprintf(&tb, "[2]\t\"S-%016x\"[1]\n", i+1)
		} else {
			tb.WriteString("[2]\t\"H-00000000000000b1\"[1](b2)\n")
		}
		tb.WriteString("\n")
		fmt.Fprintf(&lb, "Unicast lids [0x0-0x4] of switch Lid %d guid 0x%016x (sw%d):\n0x0004 002 : x\n", 100+i, i, i)
	}
	tb.WriteString("Ca\t1 \"H-00000000000000a1\"\t# \"H1\"\n[1](a2)\t\"S-0000000000000001\"[1]\t# lid 2 lmc 0 \"sw1\" lid 101 4xSDR\n\n")
	fmt.Fprintf(&tb, "Ca\t1 \"H-00000000000000b1\"\t# \"H2\"\n[1](b2)\t\"S-%016x\"[2]\t# lid 4 lmc 0 \"sw\" lid 1 4xSDR\n", n)
	return tb.String(), lb.String()
}

func TestWalkMaxHops(t *testing.T) {
	for _, c := range []struct {
		n  int
		ok bool
	}{{MaxHops, true}, {MaxHops + 1, false}} {
		ts, ls := chain(c.n)
		topo, err := ParseTopology(strings.NewReader(ts), DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		lfts, err := ParseLFTs(strings.NewReader(ls), DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		r, err := Walk(topo, lfts, 2, 4)
		if c.ok && (err != nil || len(r.Hops) != c.n) {
			t.Fatalf("%d switches: %d hops, %v", c.n, len(r.Hops), err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "more than 64 switches")) {
			t.Fatalf("%d switches: err %v", c.n, err)
		}
	}
}
