package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/connid"
)

// The fleet pairs by the connid rule: QPNs both ways and each end's path
// leading to the other's port. Identical nodes hand out the same QPNs.
func TestEnginePairsByIdentity(t *testing.T) {
	for _, tc := range []struct {
		name  string
		conns []Conn
		pairs int
	}{
		{"primary paths both ways", []Conn{conn("a", 1, 17, 2, 18), conn("b", 2, 18, 1, 17)}, 1},
		{"destination QPN its own QPN", []Conn{conn("a", 1, 100, 2, 100), conn("b", 2, 100, 1, 100)}, 1},
		{"criss-crossed", []Conn{conn("a", 1, 100, 2, 200), conn("a", 1, 200, 2, 100), conn("b", 2, 200, 1, 100), conn("b", 2, 100, 1, 200)}, 2},
		{"the same QPN on two rails of one host, each to its own peer",
			[]Conn{conn("a", 1, 100, 3, 100), conn("a", 2, 100, 4, 100), conn("p1", 3, 100, 1, 100), conn("p2", 4, 100, 2, 100)}, 2},
		{"three hosts with colliding QPNs, the third to a host not published",
			[]Conn{conn("a", 1, 100, 2, 100), conn("b", 2, 100, 1, 100), conn("c", 3, 100, 9, 100)}, 1},
		{"QPNs both ways, the paths elsewhere", []Conn{conn("a", 1, 100, 3, 100), conn("b", 2, 100, 4, 100)}, 0},
		{"one way only", []Conn{conn("a", 1, 17, 2, 18), conn("b", 2, 18, 1, 99)}, 0},
		{"an older publisher's record without its port's address", []Conn{conn("a", 0, 17, 2, 18), conn("b", 2, 18, 1, 17)}, 0},
		{"no path seen loaded", []Conn{conn("a", 1, 17, 0, 18), conn("b", 2, 18, 1, 17)}, 0},
	} {
		var got []Line
		g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
		for i := range tc.conns {
			g.Apply(&tc.conns[i], t0)
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
	a, b := conn("a", 1, 100, 2, 200), conn("b", 2, 200, 4, 100) // b's path leads to another port
	g.Apply(&a, t0)
	g.Apply(&b, t0)
	s := g.status(t0)
	if s.UnconfirmedEnds != 1 || len(s.Unconfirmed) != 1 || s.Unconfirmed[0].A.Host != "a" || s.Unconfirmed[0].B.Host != "b" ||
		!strings.HasPrefix(s.Unconfirmed[0].Why, connid.WhyElsewhere) {
		t.Fatalf("unconfirmed %d %+v", s.UnconfirmedEnds, s.Unconfirmed)
	}
	var out strings.Builder
	if err := WriteStatusTable(&out, s); err != nil || !strings.Contains(out.String(), "1 unpaired ends point at an end that does not point back") {
		t.Fatalf("status text %q (%v)", out.String(), err)
	}
	b = conn("b", 2, 200, 1, 100) // b's host loads the right path: they pair
	b.Rev = 2
	g.Apply(&b, t0)
	if s := g.status(t0); s.UnconfirmedEnds != 0 || len(s.Unconfirmed) != 0 {
		t.Fatalf("after pairing: unconfirmed %d %+v", s.UnconfirmedEnds, s.Unconfirmed)
	}
}
