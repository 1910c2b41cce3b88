package apm

import (
	"github.com/apmwatch/apmwatch/event"
)

// modify applies one ib_modify_qp. Only a successful call changes the
// model; a refused one touching APM attributes is an apm-modify-failed
// finding and stays as evidence in the episode.
//
// Order inside one call follows the kernel's: the state transition, the
// primary path, the alternate path, then the migration state. So MVAPICH2's
// single modify ALT_PATH|PATH_MIG_STATE=REARM loads the new alternate first
// and rearms onto it.
func (m *Model) modify(slot int32, q *qp, ev *event.Event) {
	md := ev.Modify
	if md.Ret != 0 {
		m.modifyFailed(q, ev)
		return
	}
	if q.flags&fStateKnown == 0 && !md.Has(event.AttrState) && md.AttrMask&(event.AttrAltPath|event.AttrPathMigState) != 0 {
		// A QP the model did not see created: a successful RTS->RTS
		// alternate load or rearm says it is in RTS.
		q.state, q.flags, q.rtsAt = event.StateRTS, q.flags|fStateKnown, ev.Boot
	}
	prev := q.state
	if md.Has(event.AttrState) {
		q.state, q.flags = md.State, q.flags|fStateKnown
		if md.State == event.StateReset {
			m.reset(q)
			return
		}
	}
	if md.Has(event.AttrAV) && md.Primary != nil {
		q.primary = routeOf(md.Primary)
	}
	if md.Has(event.AttrAltPath) {
		m.loadAlt(q, ev)
	}
	if md.Has(event.AttrPathMigState) {
		switch md.MigState {
		case event.MigRearm:
			m.rearmed(q, ev)
		case event.MigMigrated:
			// Forcing MIGRATED on a QP that had an armed (or arming)
			// alternate makes the HCA move to it: a migration done by
			// software. On a QP already MIGRATED it changes nothing.
			if q.mig != event.MigMigrated && (prev == event.StateRTS || prev == event.StateSQD) {
				m.migrate(slot, q, ev, true)
			}
			q.mig = event.MigMigrated
		default:
			q.mig = md.MigState
		}
	}
	if q.state == event.StateRTS && prev != event.StateRTS {
		q.rtsAt = ev.Boot
	}
	m.armWatch(slot, q)
}

// loadAlt records a successful alternate-path load.
func (m *Model) loadAlt(q *qp, ev *event.Event) {
	md := ev.Modify
	q.alt = routeOf(md.Alt)
	q.altLoad = refOf(ev)
	x := q.x
	if x == nil || x.ep == nil {
		return
	}
	ep := x.ep
	if ep.rearm.ok() {
		// The episode was closed by a rearm that had no new alternate
		// before it, and the alternate comes now: steps 2 and 3 swapped.
		// (A further load after a proper rearm is allowed: the spec lets
		// software change the alternate while ARMED.)
		if !ep.altLoad.ok() || ep.altSame {
			m.lapOrder(q, ep, ev)
		}
		return
	}
	if ep.altLoad.ok() {
		return
	}
	ep.altLoad = refOf(ev)
	ep.altSame = q.alt.same(q.primary) || !q.alt.valid()
	if ep.commEst.ok() {
		m.lapWindow(q, ep, refOf(ev), "the new alternate path was loaded")
	}
}

// rearmed records a successful rearm: it closes the episode.
func (m *Model) rearmed(q *qp, ev *event.Event) {
	q.mig = event.MigRearm
	q.rearm = refOf(ev)
	q.flags &^= fMigErrDone
	x := q.x
	if x == nil || x.ep == nil || x.ep.rearm.ok() {
		return
	}
	ep := x.ep
	ep.rearm = refOf(ev)
	if !ep.altLoad.ok() || ep.altSame {
		m.rearmNoAlt(q, ep, ev)
	}
	if ep.missedID != 0 {
		m.resolveMissed(q, ep, ev)
	}
}

// reset: a QP moved to RESET forgets its paths and APM state; its
// generation (and so its findings' key) stays.
func (m *Model) reset(q *qp) {
	q.primary, q.alt = route{}, route{}
	q.altLoad, q.rearm = ref{}, ref{}
	q.mig = event.MigMigrated
	q.rtsAt = 0
	if q.x != nil {
		q.x.ep = nil
		q.x.lapRecv = ref{}
		q.x.rearmSince = 0
		q.x.pendTruth = 0
	}
}

// armWatch schedules the never-armed check: a QP in RTS with a loaded
// alternate and still MIGRATED outside an episode.
func (m *Model) armWatch(slot int32, q *qp) {
	if q.flags&fNeverArmedDone != 0 || !m.unarmed(q) {
		return
	}
	m.wake(slot, q, max(q.altLoad.boot, q.rtsAt)+uint64(m.cfg.ArmDeadline))
}

func (m *Model) unarmed(q *qp) bool {
	if q.state != event.StateRTS || !q.alt.valid() || q.mig != event.MigMigrated {
		return false
	}
	return q.x == nil || q.x.ep == nil
}
