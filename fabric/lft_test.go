package fabric

import (
	"strings"
	"testing"
)

func parseLFTs(t *testing.T, s string) LFTs {
	t.Helper()
	l, err := ParseLFTs(strings.NewReader(s), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestParseLFTsFixtures(t *testing.T) {
	dump := parseLFTs(t, fixture(t, "dump_lfts.out"))
	if len(dump) != 6 {
		t.Fatalf("%d switches, want 6", len(dump))
	}
	// Read in dump_lfts.out: Leaf1 sends H7's two LIDs up both spines,
	// Leaf4 sends H8's second LID down to port 2.
	for _, c := range []struct {
		sw   GUID
		lid  uint16
		port int
	}{{leaf1, 0x16, 7}, {leaf1, 0x17, 8}, {leaf1, 0x02, 1}, {leaf1, 0x06, 0}, {spine1, 0x16, 4}, {leaf4, 0x19, 2}} {
		if p, ok := dump[c.sw].OutPort(c.lid); !ok || p != c.port {
			t.Errorf("%s lid %#x: port %d (%v), want %d", c.sw, c.lid, p, ok, c.port)
		}
	}
	if dump[leaf1].Name != "Leaf1" {
		t.Errorf("name %q", dump[leaf1].Name)
	}
	if _, ok := dump[leaf1].OutPort(0x07); ok {
		t.Error("lid 7 has no entry in the dump")
	}
	if _, ok := dump[leaf1].OutPort(0x1a); ok {
		t.Error("lid 0x1a is past the dump")
	}

	// ibroute of one switch and OpenSM's own dump say what dump_lfts says.
	one := parseLFTs(t, fixture(t, "ibroute-leaf1.out"))
	osm := parseLFTs(t, fixture(t, "opensm-lfts.dump"))
	if len(one) != 1 || len(osm) != 6 || osm[spine2].Name != "Spine2" {
		t.Fatalf("ibroute: %d switches, opensm: %d", len(one), len(osm))
	}
	for lid := uint16(1); lid < 0x20; lid++ {
		want, wok := dump[leaf1].OutPort(lid)
		if got, ok := one[leaf1].OutPort(lid); got != want || ok != wok {
			t.Errorf("ibroute lid %#x: %d %v, dump_lfts %d %v", lid, got, ok, want, wok)
		}
		for sw := range dump {
			want, wok := dump[sw].OutPort(lid)
			if got, ok := osm[sw].OutPort(lid); got != want || ok != wok {
				t.Errorf("opensm %s lid %#x: %d %v, dump_lfts %d %v", sw, lid, got, ok, want, wok)
			}
		}
	}
}

func TestParseLFTsSkipsMulticast(t *testing.T) {
	in := "Multicast mlids [0xc000-0xc001] of switch Lid 6 guid 0x0000000000200002 (Leaf1):\n" +
		"0xc000 x\n" +
		"Unicast lids [0x0-0x2] of switch Lid 6 guid 0x0000000000200002 (Leaf1):\n0x0002 001 : (x)\n"
	l := parseLFTs(t, in)
	if p, ok := l[leaf1].OutPort(2); !ok || p != 1 {
		t.Fatalf("lid 2: %d %v", p, ok)
	}
}

func TestParseLFTsRejects(t *testing.T) {
	const head = "Unicast lids [0x0-0x19] of switch Lid 6 guid 0x0000000000200002 (Leaf1):\n"
	few := DefaultLimits()
	few.MaxEntries = 100
	for _, c := range []struct {
		name, in, want string
		lim            Limits
	}{
		{"empty", "", "no unicast switch table", DefaultLimits()},
		{"entry first", "0x0002 001 : x\n", "line 1: forwarding entry before any unicast switch header", DefaultLimits()},
		{"no guid", "Unicast lids [0x0-0x19] of switch Lid 6 (Leaf1):\n", "without a switch guid", DefaultLimits()},
		{"bad guid", "Unicast lids [0x0-0x19] of switch Lid 6 guid 0xzz (Leaf1):\n", "bad switch guid", DefaultLimits()},
		{"multicast lid", head + "0xc000 001\n", "bad unicast lid", DefaultLimits()},
		{"lid 0", head + "0x0000 001\n", "bad unicast lid", DefaultLimits()},
		{"port 300", head + "0x0002 300\n", "bad out port", DefaultLimits()},
		{"no port", head + "0x0002\n", "without an out port", DefaultLimits()},
		{"conflict", head + "0x0002 001\n0x0002 002\n", "listed twice", DefaultLimits()},
		{"switch twice", head + head, "dumped twice", DefaultLimits()},
		{"too many entries", head + "0x0200 001\n", "past 100 entries", few},
		{"long line", head + "0x0002 001 " + strings.Repeat("y", 5000) + "\n", "line 2: longer than 4096 bytes", DefaultLimits()},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseLFTs(strings.NewReader(c.in), c.lim)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}
