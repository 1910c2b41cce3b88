package fleet

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// seen hands an engine the lines another run gave, as the findings
// stream holds them.
func seen(t *testing.T, g *Engine, ls []Line) {
	t.Helper()
	for _, l := range ls {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		g.Seen(b)
	}
}

// A restarted engine closes the findings its earlier run left open: the
// pair armed since gets the resolution, one whose state changed gets it
// before the later judgement, a connection gone gets it once the rebuild
// is read; a host silent then gets its resolution at its next heartbeat,
// and none while the heartbeat its finding names is its last.
func TestEngineClosesTheFindingsAnEarlierRunLeftOpen(t *testing.T) {
	var first []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&first))
	mk := func(lid uint16) (wire.Conn, wire.Conn) {
		a, b := fleettest.Conn("hostA", 1, uint32(lid)*10, lid, uint32(lid)*10+1), fleettest.Conn("hostB", lid, uint32(lid)*10+1, 1, uint32(lid)*10)
		return a, b
	}
	m := fleettest.T0.Add(10 * time.Second)
	var pairs [3][2]wire.Conn
	for i := range pairs {
		a, b := mk(uint16(2 + i))
		g.Apply(&a, fleettest.T0)
		g.Apply(&b, fleettest.T0)
		a, b = fleettest.Migrated(a, m), fleettest.Migrated(b, m)
		g.Apply(&a, m)
		g.Apply(&b, m)
		pairs[i] = [2]wire.Conn{a, b}
	}
	g.Advance(m.Add(3 * time.Second))
	if len(first) != 3 {
		t.Fatalf("first run: %+v", first)
	}

	var got []Line
	h := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	seen(t, h, first)
	later := m.Add(time.Minute)
	// pair 0 armed since, pair 1 one end rearmed, pair 2 gone (not rebuilt)
	a0, b0 := fleettest.Rearmed(pairs[0][0], later), fleettest.Rearmed(pairs[0][1], later)
	a1, b1 := fleettest.Rearmed(pairs[1][0], later), pairs[1][1]
	for _, c := range []*wire.Conn{&a0, &b0, &a1, &b1} {
		h.Apply(c, later)
	}
	h.Advance(later.Add(3 * time.Second))
	h.CloseUnpaired()
	byResolves := map[uint64]Line{}
	var findings []Line
	for _, l := range got {
		if l.Resolved {
			byResolves[l.Resolves] = l
		} else {
			findings = append(findings, l)
		}
	}
	for _, f := range first {
		r, ok := byResolves[f.ID]
		if !ok || r.Kind != apm.UnprotectedConnection || r.Connection != f.Connection {
			t.Errorf("%s: no resolution (%+v)", f.Connection, got)
		}
	}
	if len(findings) != 1 || findings[0].Kind != apm.OneSidedRearm || findings[0].QP.QPN != 31 || len(got) != 4 {
		t.Fatalf("lines: %+v", got)
	}

	// host-silent
	var silent []Line
	s := NewEngine(EngineConfig{SilentAfter: time.Second}, collect(&silent))
	beat(t, s, "hostC", fleettest.T0, fleettest.T0, 0)
	s.Advance(fleettest.T0.Add(2 * time.Second))
	if len(silent) != 1 || silent[0].Kind != apm.HostSilent {
		t.Fatalf("silent: %+v", silent)
	}
	var still []Line
	r := NewEngine(EngineConfig{SilentAfter: time.Second}, collect(&still))
	seen(t, r, silent)
	beat(t, r, "hostC", fleettest.T0, fleettest.T0, 0) // the last heartbeat before the silence: still silent
	r.Advance(fleettest.T0.Add(2 * time.Second))
	if len(still) != 0 || !r.Silent("hostC") {
		t.Fatalf("still silent: %+v", still)
	}
	var purged []Line
	u := NewEngine(EngineConfig{SilentAfter: time.Second}, collect(&purged))
	seen(t, u, silent)
	u.CloseUnpaired() // its heartbeats purged from the stream
	if len(purged) != 1 || purged[0].Type != "resolution" || purged[0].Resolves != silent[0].ID {
		t.Fatalf("purged: %+v", purged)
	}
	r.CloseUnpaired()
	if len(still) != 0 {
		t.Fatalf("a host still silent resolved: %+v", still)
	}
	var again []Line
	q := NewEngine(EngineConfig{SilentAfter: time.Second}, collect(&again))
	seen(t, q, silent)
	beat(t, q, "hostC", fleettest.T0.Add(time.Minute), fleettest.T0.Add(time.Minute), 0) // heard since
	if len(again) != 1 || again[0].Type != "resolution" || again[0].Resolves != silent[0].ID {
		t.Fatalf("heard again: %+v", again)
	}
}
