package apm

import (
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// A forced migration: software writes PATH_MIG_STATE=MIGRATED on an ARMED
// QP in RTS and the HCA moves to the alternate at once (IBTA: "only when
// the current state is Armed"; rdmavt refuses it from REARM with EINVAL
// and takes it from MIGRATED as a no-op). Whether and when the forcing
// side gets a PATH_MIG is the driver's or the firmware's choice:
//   - rdmavt raises it inside the modify call, so its stamp comes before
//     the modify's, which apmwatch takes at the call's exit (fexit);
//   - a firmware may raise it after the call returned, or not at all.
// Every order is one forced migration: one episode, and never flapping
// (software moved the QP, no path failed).

// forcedEventLead bounds how long before the modify's exit a PATH_MIG
// raised inside the call may be stamped: the rest of the call (rdmavt
// raises it just before it returns; a firmware command takes
// milliseconds). The modify record has no entry stamp to bound it better.
const forcedEventLead = 100 * time.Millisecond

// forceMigrated applies a successful modify to PATH_MIG_STATE=MIGRATED.
// armed() cannot tell REARM from ARMED, and a reading of REARM is only a
// snapshot (the peer's next packet arms the QP), so success on an armed QP
// is taken as IBTA and rdmavt mean it: the QP was ARMED and moved. (A
// firmware that took MIGRATED from REARM would look the same.)
func (m *Model) forceMigrated(slot int32, q *qp, ev *event.Event, prev event.QPState) {
	switch {
	case !q.armed():
		// Already MIGRATED: either its own PATH_MIG, raised inside the
		// call, came first, or it is a no-op.
		m.forcedAfterEvent(q, ev)
	case prev == event.StateRTS || prev == event.StateSQD:
		m.migrate(slot, q, ev, true)
	}
	q.mig, q.flags = event.MigMigrated, q.flags&^fArmed|fMigKnown
}

// forcedAfterEvent: a forced modify on a QP whose PATH_MIG came within
// forcedEventLead before it, with no rearm since, is the event raised
// inside the call: the migration becomes the forced one it was.
func (m *Model) forcedAfterEvent(q *qp, ev *event.Event) {
	x := q.x
	if x == nil || x.ep == nil {
		return
	}
	l, ep := &x.last, x.ep
	if l.forced || ep.mig != l.at || ep.rearm.ok() || ev.Boot < l.at.boot || ev.Boot-l.at.boot > uint64(forcedEventLead) {
		return
	}
	m.unflap(q, l.at)
	ep.forced, ep.event, ep.mig = true, ep.mig, refOf(ev)
	l.forced, l.event, l.at = true, true, ep.mig
}

// forcedEvent reports whether a PATH_MIG is the event of the last forced
// migration, raised after the modify returned (within RearmDeadline).
func (m *Model) forcedEvent(q *qp, ev *event.Event) bool {
	x := q.ax()
	l := &x.last
	if !l.forced || l.event || ev.Boot < l.at.boot || ev.Boot-l.at.boot > uint64(m.cfg.RearmDeadline) {
		return false
	}
	l.event = true
	if ep := x.ep; ep != nil && ep.mig == l.at {
		ep.event = refOf(ev)
	}
	return true
}
