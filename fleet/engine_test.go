package fleet

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

func collect(out *[]Line) func(Line) { return func(l Line) { *out = append(*out, l) } }

func TestEnginePairsEndsByAddressAndQPN(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a, b := fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
	other := fleettest.Conn("hostC", 3, 17, 2, 99) // same QPN as a, another LID: not a's peer
	g.Apply(&a, fleettest.T0)
	g.Apply(&other, fleettest.T0)
	if st := g.Stats(); st.Unpaired != 2 {
		t.Fatalf("before the peer: %+v", st)
	}
	g.Apply(&b, fleettest.T0)
	st := g.Stats()
	if st.Unpaired != 1 || st.ByState[StateArmed] != 1 || st.Ends != 3 {
		t.Fatalf("after the peer: %+v", st)
	}
	g.Advance(fleettest.T0.Add(time.Minute))
	if len(got) != 0 {
		t.Fatalf("an armed pair judged: %+v", got)
	}
	gone := b
	gone.Gone, gone.At, gone.Rev = true, fleettest.T0.Add(time.Second), 2
	g.Apply(&gone, fleettest.T0.Add(time.Second))
	if st := g.Stats(); st.Unpaired != 2 || st.Ends != 2 || st.ByState[StateArmed] != 0 {
		t.Fatalf("after the peer went: %+v", st)
	}
}

func TestEngineOneSidedRearmOnceAfterTheDeadline(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a, b := fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
	g.Apply(&a, fleettest.T0)
	g.Apply(&b, fleettest.T0)
	m := fleettest.T0.Add(10 * time.Second)
	a, b = fleettest.Migrated(a, m), fleettest.Migrated(b, m.Add(time.Millisecond))
	g.Apply(&a, m)
	g.Apply(&b, m)
	a = fleettest.Rearmed(a, m.Add(100*time.Millisecond))
	g.Apply(&a, m.Add(100*time.Millisecond))
	g.Advance(m.Add(time.Second))
	if len(got) != 0 {
		t.Fatalf("judged before the deadline: %+v", got)
	}
	g.Advance(m.Add(3 * time.Second))
	if len(got) != 1 {
		t.Fatalf("%d findings, want 1: %+v", len(got), got)
	}
	f := got[0]
	if f.Kind != apm.OneSidedRearm || f.Host != "hostB" || f.QP.QPN != 18 || f.Peer == nil || f.Peer.Host != "hostA" ||
		len(f.Hosts) != 2 || len(f.Evidence) != 2 || f.Type != "finding" || f.ID == 0 {
		t.Fatalf("finding: %+v", f)
	}
	// a record that changes nothing the judgement rests on: not again
	b.Rev++
	b.At = m.Add(5 * time.Second)
	g.Apply(&b, b.At)
	g.Advance(m.Add(10 * time.Second))
	if len(got) != 1 {
		t.Fatalf("judged twice: %+v", got[1:])
	}
	// the peer rearms: resolved
	b = fleettest.Rearmed(b, m.Add(20*time.Second))
	g.Apply(&b, b.At)
	if len(got) != 2 || !got[1].Resolved || got[1].Resolves != f.ID {
		t.Fatalf("resolution: %+v", got[1:])
	}
	if st := g.Stats(); st.ByState[StateArmed] != 1 || st.ByState[StateOneSided] != 0 {
		t.Fatalf("states: %+v", st)
	}
}

func TestEngineUnprotectedWhenNeitherEndRearms(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a, b := fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
	g.Apply(&a, fleettest.T0)
	g.Apply(&b, fleettest.T0)
	m := fleettest.T0.Add(10 * time.Second)
	a, b = fleettest.Migrated(a, m), fleettest.Migrated(b, m)
	g.Apply(&a, m)
	g.Apply(&b, m)
	g.Advance(m.Add(3 * time.Second))
	if len(got) != 1 || got[0].Kind != apm.UnprotectedConnection {
		t.Fatalf("findings: %+v", got)
	}
	if st := g.Stats(); st.ByState[StateUnprotected] != 1 {
		t.Fatalf("states: %+v", st)
	}
}

func TestEngineNeverJudgesConnectionsWithoutAPM(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a, b := fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
	a.APM, a.Armed, b.APM, b.Armed = false, false, false, false
	g.Apply(&a, fleettest.T0)
	g.Apply(&b, fleettest.T0)
	g.Advance(fleettest.T0.Add(time.Hour))
	if len(got) != 0 || g.Stats().ByState[StateNoAPM] != 1 {
		t.Fatalf("findings %+v, stats %+v", got, g.Stats())
	}
}

func TestEngineRebuiltFromLastRecordsJudgesNothingTwice(t *testing.T) {
	var first []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&first))
	a, b := fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
	m := fleettest.T0.Add(10 * time.Second)
	a, b = fleettest.Rearmed(fleettest.Migrated(a, m), m.Add(time.Millisecond)), fleettest.Migrated(b, m)
	g.Apply(&a, m)
	g.Apply(&b, m)
	g.Advance(m.Add(3 * time.Second))
	if len(first) != 1 {
		t.Fatalf("first run: %+v", first)
	}
	var again []Line
	h := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&again))
	h.MarkJudged(first[0].ID)
	h.Apply(&b, m.Add(time.Hour))
	h.Apply(&a, m.Add(time.Hour))
	h.Advance(m.Add(time.Hour))
	if len(again) != 0 {
		t.Fatalf("judged again after a rebuild: %+v", again)
	}
	var fresh []Line
	k := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&fresh))
	k.Apply(&b, m.Add(time.Hour))
	k.Apply(&a, m.Add(time.Hour))
	k.Advance(m.Add(time.Hour + 3*time.Second)) // stored an hour late: the deadline runs from then
	if len(fresh) != 1 || fresh[0].ID != first[0].ID {
		t.Fatalf("the same judgement must have the same ID: %+v vs %+v", fresh, first)
	}
}

func TestEngineIgnoresStaleRecords(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a := fleettest.Conn("hostA", 1, 17, 2, 18)
	a.Run = "hostA-1"
	newer := fleettest.Migrated(a, fleettest.T0.Add(time.Second))
	g.Apply(&newer, fleettest.T0)
	g.Apply(&a, fleettest.T0)
	if g.Stale != 1 {
		t.Fatalf("stale: %d", g.Stale)
	}
}

func TestEngineOrdersARunByRevisionEvenWhenItsClockStepsBack(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a := fleettest.Conn("hostA", 1, 17, 2, 18)
	a.Run = "hostA-1"
	g.Apply(&a, fleettest.T0)
	back := fleettest.Migrated(a, fleettest.T0.Add(-time.Minute)) // the host's clock stepped back a minute
	g.Apply(&back, fleettest.T0)
	if g.Stale != 0 || g.lookup(func() wire.EndKey { k, _ := a.Keys(); return k }()).armed {
		t.Fatalf("a later revision of the same run was taken as stale (%d)", g.Stale)
	}
	old := a // an earlier revision, delivered late
	g.Apply(&old, fleettest.T0)
	if g.Stale != 1 {
		t.Fatalf("an earlier revision was applied")
	}
}
