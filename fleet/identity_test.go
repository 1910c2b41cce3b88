package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/connid"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// The fleet pairs by the connid rule: QPNs both ways and each end's path
// leading to the other's port. Identical nodes hand out the same QPNs.
func TestEnginePairsByIdentity(t *testing.T) {
	for _, tc := range []struct {
		name  string
		conns []wire.Conn
		pairs int
	}{
		{"primary paths both ways", []wire.Conn{fleettest.Conn("a", 1, 17, 2, 18), fleettest.Conn("b", 2, 18, 1, 17)}, 1},
		{"destination QPN its own QPN", []wire.Conn{fleettest.Conn("a", 1, 100, 2, 100), fleettest.Conn("b", 2, 100, 1, 100)}, 1},
		{"criss-crossed", []wire.Conn{fleettest.Conn("a", 1, 100, 2, 200), fleettest.Conn("a", 1, 200, 2, 100), fleettest.Conn("b", 2, 200, 1, 100), fleettest.Conn("b", 2, 100, 1, 200)}, 2},
		{"the same QPN on two rails of one host, each to its own peer",
			[]wire.Conn{fleettest.Conn("a", 1, 100, 3, 100), fleettest.Conn("a", 2, 100, 4, 100), fleettest.Conn("p1", 3, 100, 1, 100), fleettest.Conn("p2", 4, 100, 2, 100)}, 2},
		{"three hosts with colliding QPNs, the third to a host not published",
			[]wire.Conn{fleettest.Conn("a", 1, 100, 2, 100), fleettest.Conn("b", 2, 100, 1, 100), fleettest.Conn("c", 3, 100, 9, 100)}, 1},
		{"QPNs both ways, the paths elsewhere", []wire.Conn{fleettest.Conn("a", 1, 100, 3, 100), fleettest.Conn("b", 2, 100, 4, 100)}, 0},
		{"one way only", []wire.Conn{fleettest.Conn("a", 1, 17, 2, 18), fleettest.Conn("b", 2, 18, 1, 99)}, 0},
		{"an older publisher's record without its port's address", []wire.Conn{fleettest.Conn("a", 0, 17, 2, 18), fleettest.Conn("b", 2, 18, 1, 17)}, 0},
		{"no path seen loaded", []wire.Conn{fleettest.Conn("a", 1, 17, 0, 18), fleettest.Conn("b", 2, 18, 1, 17)}, 0},
	} {
		var got []Line
		g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
		for i := range tc.conns {
			g.Apply(&tc.conns[i], fleettest.T0)
		}
		n := 0
		for _, c := range g.Stats().ByState {
			n += c
		}
		if n != tc.pairs {
			t.Errorf("%s: %d pairs, want %d (%+v)", tc.name, n, tc.pairs, g.Stats())
		}
	}
}

// A candidate the rule refuses is listed as unconfirmed, with why, until it
// pairs or goes; a confirmed pair is not.
func TestEngineListsUnconfirmedEnds(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a, b := fleettest.Conn("a", 1, 100, 2, 200), fleettest.Conn("b", 2, 200, 4, 100) // b's path leads to another port
	g.Apply(&a, fleettest.T0)
	g.Apply(&b, fleettest.T0)
	s := g.status(fleettest.T0)
	if s.UnconfirmedEnds != 1 || len(s.Unconfirmed) != 1 || s.Unconfirmed[0].A.Host != "a" || s.Unconfirmed[0].B.Host != "b" ||
		!strings.HasPrefix(s.Unconfirmed[0].Why, connid.WhyElsewhere) {
		t.Fatalf("unconfirmed %d %+v", s.UnconfirmedEnds, s.Unconfirmed)
	}
	var out strings.Builder
	if err := WriteStatusTable(&out, s); err != nil || !strings.Contains(out.String(), "1 unpaired ends point at an end that does not point back") {
		t.Fatalf("status text %q (%v)", out.String(), err)
	}
	b = fleettest.Conn("b", 2, 200, 1, 100) // b's host loads the right path: they pair
	b.Rev = 2
	g.Apply(&b, fleettest.T0)
	if s := g.status(fleettest.T0); s.UnconfirmedEnds != 0 || len(s.Unconfirmed) != 0 {
		t.Fatalf("after pairing: unconfirmed %d %+v", s.UnconfirmedEnds, s.Unconfirmed)
	}
}
