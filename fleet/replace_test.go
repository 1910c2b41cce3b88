package fleet

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// An unprotected connection whose one end then rearms becomes one-sided:
// the one-sided-rearm finding replaces the unprotected-connection one,
// which gets its resolution; the peer's rearm resolves the other. No
// finding is left open.
func TestFleetResolvesAFindingALaterJudgementReplaces(t *testing.T) {
	url := fleettest.NATS(t)
	f := startFleet(t, url, 0, 1)
	defer f.stop()
	a, b, ea, eb := migratedPair(t, url)
	fleettest.WaitFor(t, 30*time.Second, "unprotected-connection", func() bool { return len(f.out.lines(t)) == 1 })
	a.rearm(ea)
	fleettest.WaitFor(t, 30*time.Second, "one-sided-rearm", func() bool { return len(f.out.lines(t)) == 3 })
	b.rearm(eb)
	fleettest.WaitFor(t, 30*time.Second, "its resolution", func() bool { return len(f.out.lines(t)) == 4 })
	ls := f.out.lines(t)
	unprot, resU, oneSided, resO := ls[0], ls[1], ls[2], ls[3]
	if unprot.Kind != apm.UnprotectedConnection || unprot.Type != "finding" ||
		resU.Type != "resolution" || resU.Kind != apm.UnprotectedConnection || resU.Resolves != unprot.ID ||
		oneSided.Kind != apm.OneSidedRearm || oneSided.Type != "finding" || oneSided.Host != "hostB" ||
		resO.Type != "resolution" || resO.Kind != apm.OneSidedRearm || resO.Resolves != oneSided.ID {
		t.Fatalf("lines: %+v", ls)
	}
}

// A pair whose end goes, or connects elsewhere, while its finding is open
// closes it with a resolution saying so.
func TestEngineResolvesTheOpenFindingOfAPairThatParts(t *testing.T) {
	for _, how := range []string{"gone", "elsewhere"} {
		t.Run(how, func(t *testing.T) {
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
			at := m.Add(4 * time.Second)
			b.Rev, b.At = b.Rev+1, at
			if how == "gone" {
				b.Gone = true
			} else {
				b.Remote = wire.Addr{LID: 7, QPN: 77}
			}
			g.Apply(&b, at)
			if len(got) != 2 || got[1].Type != "resolution" || got[1].Resolves != got[0].ID || got[1].Kind != apm.UnprotectedConnection {
				t.Fatalf("after the peer went %s: %+v", how, got[1:])
			}
		})
	}
}
