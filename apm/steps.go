package apm

import (
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// The application's steps after a migration as the state machine applies
// them: an alternate-path load and a rearm (or a modify to ARMED).

// loadAlt records a successful alternate-path load.
func (m *Model) loadAlt(q *qp, ev *event.Event) {
	q.alt = routeOf(ev.Modify.Alt)
	q.altLoad = refOf(ev)
	ep := q.episode()
	if ep == nil || ev.Boot < ep.mig.boot {
		return
	}
	if ep.rearm.ok() {
		if ev.Boot < ep.rearm.boot {
			// A late load: it was in force at the rearm.
			ep.altLoad = refOf(ev)
			if ep.bareRearm.ok() {
				r := ep.bareRearm
				ep.bareRearm = ref{}
				if q.alt.same(q.primary) {
					m.emitNoAlt(q, ep, r, true)
				}
			}
			return
		}
		m.lapOrder(q, ep, ev)
		return
	}
	ep.altLoad = refOf(ev)
}

// rearmed records a successful rearm: it closes the episode of a migration
// before it. A rearm stamped before the migration (a late event) belongs
// to the time before it and closes nothing.
func (m *Model) rearmed(slot int32, q *qp, ev *event.Event) {
	ep := q.episode()
	if ep != nil && ev.Boot < ep.mig.boot {
		return
	}
	q.rearm = refOf(ev)
	if took := ev.Modify.Took; took >= time.Millisecond {
		q.ax().rearmEnd = ev.Boot + uint64(took)
	} else if q.x != nil {
		q.x.rearmEnd = 0
	}
	q.flags &^= fMigErrDone
	q.mig, q.migAt, q.flags = event.MigRearm, ev.Boot, q.flags|fMigKnown|fArmed
	m.stuckRestart(q, q.rearm, false)
	if ep == nil && q.alt.valid() && !q.alt.same(q.primary) {
		m.protected(q, NeverArmed, RearmWithoutAlt, APMModifyFailed) // armed onto a loaded alternate
	}
	if ep == nil || ep.rearm.ok() {
		return
	}
	ep.rearm = refOf(ev)
	m.rearmNoAlt(slot, q, ep, ev)
	if ep.missedID != 0 {
		m.resolveMissed(q, ep, ev)
	}
}

// armedByModify applies a successful modify to PATH_MIG_STATE=ARMED.
// IBTA and rdmavt refuse it (EINVAL, then it is only evidence), but mlx4
// and mlx5 pass it to the firmware, which may take it: the QP is then armed
// as after a rearm that completed (REARM turned ARMED), so its next PATH_MIG
// is a migration, not a stray event.
func (m *Model) armedByModify(slot int32, q *qp, ev *event.Event) {
	m.rearmed(slot, q, ev)
	if q.rearm != refOf(ev) {
		return // stamped before the migration it would close: nothing changed
	}
	q.mig = event.MigArmed
	if x := q.x; x != nil {
		if x.stuckID != 0 {
			m.resolveStuck(q, x, refOf(ev), "modify to ARMED")
		}
		x.rearmSince, x.stuckID = 0, 0
	}
}
