package apm

import "github.com/apmwatch/apmwatch/event"

// tracked reports whether APM applies to a QP type: RC, UC and XRC; not the
// special QPs nor UD.
func tracked(t event.QPType) bool {
	return t != event.QPTypeSMI && t != event.QPTypeGSI && t != event.QPTypeUD
}

func (m *Model) event(ev *event.Event) {
	switch ev.Kind {
	case event.KindModify:
		if ev.Modify == nil || ev.QPN == 0 || !tracked(ev.Modify.QPType) {
			m.stats.Ignored++
			return
		}
		slot, q := m.get(m.keyOf(ev.Device, ev.QPN), true)
		if q == nil {
			return
		}
		m.owner(q, ev)
		m.modify(slot, q, ev)
	case event.KindQPEvent:
		if ev.QP == nil || ev.QPN == 0 || !tracked(ev.QP.QPType) {
			m.stats.Ignored++
			return
		}
		slot, q := m.get(m.keyOf(ev.Device, ev.QPN), true)
		if q == nil {
			return
		}
		m.qpEvent(slot, q, ev)
	case event.KindQPCreate:
		if ev.Life == nil || ev.Life.Ret != 0 || ev.QPN == 0 || !tracked(ev.Life.QPType) {
			m.stats.Ignored++
			return
		}
		key := m.keyOf(ev.Device, ev.QPN)
		if slot, q := m.get(key, false); q != nil {
			m.drop(slot, q) // a create we did not see the destroy of
		}
		_, q := m.get(key, true)
		if q == nil {
			return
		}
		q.flags |= fStateKnown
		q.state = event.StateReset
		q.qpType = ev.Life.QPType
		m.owner(q, ev)
	case event.KindQPDestroy:
		if ev.Life == nil || ev.Life.Ret != 0 {
			m.stats.Ignored++
			return
		}
		if slot, q := m.get(m.keyOf(ev.Device, ev.QPN), false); q != nil {
			m.drop(slot, q)
		}
	case event.KindCMNotify, event.KindCMHandler, event.KindMAD:
		m.cm(ev)
	default:
		m.stats.Ignored++ // port events carry no per-QP APM state
	}
}

// owner records who owns the QP: the process that created it or, when the
// create was not seen, the first process that modified it. Later modifies by
// others (a tool rearming it, a test injector) do not make them the owner:
// findings name the process whose QP it is.
func (m *Model) owner(q *qp, ev *event.Event) {
	if ev.Kind == event.KindQPCreate || (q.pid == 0 && q.comm == 0) {
		q.pid = ev.PID
		if ev.Comm != "" {
			q.comm = m.comms.id(ev.Comm)
		}
	}
	if ev.Modify != nil && ev.Modify.QPType != 0 {
		q.qpType = ev.Modify.QPType
	}
}

func (m *Model) qpEvent(slot int32, q *qp, ev *event.Event) {
	switch ev.QP.Type {
	case event.EvPathMig:
		// The HCA only migrates a QP that is sending: it was in RTS.
		if q.flags&fStateKnown == 0 {
			q.state, q.flags = event.StateRTS, q.flags|fStateKnown
		}
		if x := q.x; x != nil && x.ep != nil && x.ep.forced && !x.ep.rearm.ok() && !x.ep.event.ok() &&
			ev.Boot-x.ep.mig.boot <= uint64(m.cfg.RearmDeadline) {
			// The event of the migration software just forced (an HCA may
			// raise it, and the lab's injector forces MIGRATED before it
			// raises PATH_MIG): one migration, not two.
			x.ep.event = refOf(ev)
			return
		}
		m.migrate(slot, q, ev, false)
	case event.EvPathMigErr:
		m.migrationError(q, ev)
	case event.EvCommEst:
		if x := q.x; x != nil && x.ep != nil && !x.ep.commEst.ok() {
			x.ep.commEst = refOf(ev)
		}
	case event.EvQPFatal, event.EvQPReqErr, event.EvQPAccessErr:
		q.state, q.flags = event.StateErr, q.flags|fStateKnown
	}
}

// migrate starts an episode: the HCA (or software, forced) swapped to the
// alternate path, which is now the primary; there is no alternate any more.
func (m *Model) migrate(slot int32, q *qp, ev *event.Event, forced bool) {
	x := q.ax()
	if ep := x.ep; ep != nil {
		x.prev = epSummary{n: ep.n, rearmed: ep.rearm.ok(), rearmNoAlt: ep.done&dNoAlt != 0, forced: ep.forced}
	}
	ep := &episode{n: x.prev.n + 1, forced: forced, mig: refOf(ev), left: q.primary}
	x.ep = ep
	x.lastMig = ep.mig
	if q.alt.valid() {
		q.primary = q.alt
	}
	q.alt = route{}
	q.mig = event.MigMigrated
	m.flap(q, ev)
	m.wake(slot, q, ev.Boot+uint64(m.cfg.RearmDeadline))
	// Evidence that the QP is CM-managed may still come: check at the
	// notify deadline whatever is known now.
	m.wake(slot, q, ev.Boot+uint64(m.cfg.NotifyDeadline))
}
