package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
)

// Two hosts whose ports have LMC 2 (LIDs 4-7 and 8-11) and whose
// connection runs on LMC aliases (DLIDs 10 and 6): the ends pair, and
// hostB's missing rearm is a one-sided rearm naming hostA.
func TestEnginePairsEndsOnLMCAliases(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a, b := fleettest.Conn("hostA", 4, 17, 10, 18), fleettest.Conn("hostB", 8, 18, 6, 17)
	a.Local.LMC, b.Local.LMC = 2, 2
	if a.Partition() != b.Partition() {
		t.Fatalf("the ends of one connection in partitions %d and %d", a.Partition(), b.Partition())
	}
	g.Apply(&a, fleettest.T0)
	g.Apply(&b, fleettest.T0)
	if st := g.Stats(); st.Unpaired != 0 || st.ByState[StateArmed] != 1 {
		t.Fatalf("ends on LMC aliases not paired: %+v", st)
	}
	m := fleettest.T0.Add(10 * time.Second)
	a, b = fleettest.Migrated(a, m), fleettest.Migrated(b, m)
	g.Apply(&a, m)
	g.Apply(&b, m)
	a = fleettest.Rearmed(a, m.Add(100*time.Millisecond))
	g.Apply(&a, a.At)
	g.Advance(m.Add(3 * time.Second))
	if len(got) != 1 || got[0].Kind != apm.OneSidedRearm || got[0].Host != "hostB" || got[0].Peer == nil || got[0].Peer.Host != "hostA" {
		t.Fatalf("findings: %+v, want hostB's one-sided rearm", got)
	}
}

// Ports of different LMCs: hostA (LMC 2) takes hostB's DLID 5 to 4, the
// base of a range hostB's port (LMC 0, LID 4) does not have: even when
// the keys meet, the ends are not a pair, and the status says why.
func TestEngineDoesNotPairAcrossLMCs(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a, b := fleettest.Conn("hostA", 8, 17, 5, 18), fleettest.Conn("hostB", 4, 18, 8, 17)
	a.Local.LMC = 2
	g.Apply(&a, fleettest.T0)
	g.Apply(&b, fleettest.T0)
	if st := g.Stats(); st.Unpaired != 2 {
		t.Fatalf("ends of different LMCs paired: %+v", st)
	}
	s := g.status(fleettest.T0)
	if s.UnconfirmedEnds == 0 || !strings.Contains(s.Unconfirmed[0].Why, "LMCs differ (") {
		t.Fatalf("unconfirmed %d %+v", s.UnconfirmedEnds, s.Unconfirmed)
	}
}
