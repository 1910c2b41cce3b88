package fleet

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

func keyOf(c wire.Conn) wire.EndKey { k, _ := c.Keys(); return k }

// A host restarted with its clock an hour behind: its new run's records
// are taken in the order they arrive, not refused as older than the
// records of its earlier run.
func TestEngineOrdersRunsByArrivalNotByTheHostClock(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a, b := fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
	a.Run, b.Run = "hostA-1", "hostB-1"
	m := fleettest.T0.Add(time.Minute)
	a, b = fleettest.Rearmed(fleettest.Migrated(a, m), m.Add(time.Millisecond)), fleettest.Migrated(b, m)
	b = fleettest.Rearmed(b, m.Add(time.Millisecond))
	g.Apply(&a, m)
	g.Apply(&b, m)
	again := fleettest.Migrated(fleettest.Conn("hostB", 2, 18, 1, 17), m.Add(-time.Hour)) // its new run, an hour behind
	again.Run, again.Rev = "hostB-2", 1
	g.Apply(&again, m.Add(time.Second))
	if g.Stale != 0 || g.lookup(keyOf(b)).armed {
		t.Fatalf("the restarted host's record was refused (%d stale)", g.Stale)
	}
	g.Advance(m.Add(5 * time.Second))
	if len(got) != 1 || got[0].Host != "hostB" {
		t.Fatalf("findings: %+v", got)
	}
}

// A gone end keeps a tombstone: an earlier record of its run arriving
// after the gone (sent again) does not bring it back; a later revision or
// another run does; tombstones go after their time, and past their bound
// the oldest first.
func TestEngineGoneEndKeepsATombstone(t *testing.T) {
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second, TombstoneTTL: time.Hour, MaxTombstones: 4}, func(Line) {})
	a := fleettest.Conn("hostA", 1, 17, 2, 18)
	a.Run = "hostA-1"
	live := fleettest.Migrated(a, fleettest.T0.Add(time.Second))
	gone := live
	gone.Gone, gone.Rev = true, live.Rev+1
	g.Apply(&a, fleettest.T0)
	g.Apply(&gone, fleettest.T0.Add(2*time.Second))
	g.Apply(&live, fleettest.T0.Add(3*time.Second)) // sent again after the gone
	if st := g.Stats(); st.Ends != 0 || g.Stale != 1 || g.Tombstones() != 1 {
		t.Fatalf("a ghost: %d ends, %d stale, %d tombstones", st.Ends, g.Stale, g.Tombstones())
	}
	reused := a // the QP number used again, by the same run
	reused.Rev = gone.Rev + 1
	g.Apply(&reused, fleettest.T0.Add(4*time.Second))
	if g.Stats().Ends != 1 || g.Tombstones() != 0 {
		t.Fatalf("a later revision was refused: %d ends, %d tombstones", g.Stats().Ends, g.Tombstones())
	}
	g.Apply(&gone, fleettest.T0.Add(5*time.Second)) // stale now: reused's revision is later
	reused.Gone, reused.Rev = true, reused.Rev+1
	g.Apply(&reused, fleettest.T0.Add(5*time.Second))
	if g.Stats().Ends != 0 || g.Tombstones() != 1 {
		t.Fatalf("gone again: %d ends, %d tombstones", g.Stats().Ends, g.Tombstones())
	}
	g.Advance(fleettest.T0.Add(5*time.Second + time.Hour))
	if g.Tombstones() != 0 {
		t.Fatalf("%d tombstones after their time", g.Tombstones())
	}
	for i := range 10 {
		c := fleettest.Conn("hostA", 1, uint32(100+i), 2, 18)
		c.Run, c.Gone = "hostA-1", true
		g.Apply(&c, fleettest.T0.Add(2*time.Hour))
	}
	if g.Tombstones() != 4 || g.TombsEvicted != 6 {
		t.Fatalf("%d tombstones, %d evicted; want 4 and 6", g.Tombstones(), g.TombsEvicted)
	}
	other := fleettest.Conn("hostA", 1, 109, 2, 18) // the last buried, another run: a new end
	other.Run = "hostA-2"
	g.Apply(&other, fleettest.T0.Add(2*time.Hour))
	if g.Stats().Ends != 1 {
		t.Fatal("another run's record refused by a tombstone")
	}
}

// The gone record of a QP's earlier connection (its own subject) does
// not remove the connection the QP has now.
func TestEngineGoneOfAnEarlierConnectionLeavesTheEnd(t *testing.T) {
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, func(Line) {})
	now := fleettest.Conn("hostA", 1, 17, 3, 30)
	now.Run = "hostA-2"
	g.Apply(&now, fleettest.T0)
	old := fleettest.Conn("hostA", 1, 17, 2, 18)
	old.Run, old.Gone = "hostA-1", true
	g.Apply(&old, fleettest.T0.Add(time.Second))
	if g.Stats().Ends != 1 || g.Stale != 1 {
		t.Fatalf("%d ends, %d stale: the earlier connection's gone removed the end", g.Stats().Ends, g.Stale)
	}
}
