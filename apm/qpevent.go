package apm

import (
	"github.com/apmwatch/apmwatch/event"
)

// Affiliated async QP events enter the state machine here.

// qpEvent applies an affiliated async event. A driver's copy (QPN only)
// is tied to the one QP with that number the model knows; when ib_core or
// ib_uverbs delivers the same event too, the second copy is dropped.
func (m *Model) qpEvent(ev *event.Event) {
	if ev.QP == nil || ev.QPN == 0 {
		m.stats.Ignored++
		return
	}
	untyped := ev.QP.Untyped(ev)
	var slot int32
	var q *qp
	switch {
	case untyped && ev.Device == "":
		// a driver's copy names no device: its typed twin, when one comes,
		// says which QP it is about (TestDriverEventHeldForTypedTwin)
		if m.in.typedTwin(ev.QPN, ev.QP.Type, ev.Boot, uint64(m.cfg.DuplicateWindow)) || m.typedSeen(ev) {
			m.stats.Duplicates++
			return
		}
		if slot, q = m.byQPN(ev.QPN); q == nil {
			m.stats.Unattributed++
			return
		}
	case untyped:
		if slot, q = m.get(m.keyOf(ev.Device, ev.QPN), false); q == nil {
			m.stats.Unattributed++
			return
		}
	default:
		if !ev.QP.QPType.HasAPM() {
			m.stats.Ignored++
			return
		}
		if slot, q = m.get(m.keyOf(ev.Device, ev.QPN), true); q == nil {
			return
		}
	}
	if m.duplicate(q, ev, untyped) {
		m.stats.Duplicates++
		return
	}
	switch ev.QP.Type {
	case event.EvPathMig:
		m.pathMig(slot, q, ev)
	case event.EvPathMigErr:
		m.migrationError(q, ev)
	case event.EvQPFatal, event.EvQPReqErr, event.EvQPAccessErr:
		// a local catastrophic error, or an application or protocol
		// error: not a path failure (deathsNotPathFailures)
		m.toState(q, event.StateErr)
	}
}

// typedSeen reports whether a typed copy of the driver's event ev was
// applied to a QP with its QPN on any device within DuplicateWindow.
func (m *Model) typedSeen(ev *event.Event) bool {
	seen := false
	m.devs.each(func(id uint32, _ string) {
		if slot, ok := m.qps.lookup(uint64(id)<<32 | uint64(ev.QPN)); ok {
			q := m.qps.at(slot)
			if q == nil || q.x == nil {
				return
			}
			l := q.x.lastEv
			d := max(l.boot, ev.Boot) - min(l.boot, ev.Boot)
			seen = seen || l.boot != 0 && !l.untyped && l.typ == ev.QP.Type && d <= uint64(m.cfg.DuplicateWindow)
		}
	})
	return seen
}

// duplicate reports whether ev is the second copy of the QP's last event:
// the same type from the other kind of hook within DuplicateWindow.
func (m *Model) duplicate(q *qp, ev *event.Event, untyped bool) bool {
	x := q.ax()
	last := x.lastEv
	x.lastEv = qpEvCopy{boot: ev.Boot, typ: ev.QP.Type, untyped: untyped}
	if last.boot == 0 || last.typ != ev.QP.Type || last.untyped == untyped {
		return false
	}
	d := ev.Boot - last.boot
	if ev.Boot < last.boot {
		d = last.boot - ev.Boot
	}
	if d > uint64(m.cfg.DuplicateWindow) {
		return false
	}
	x.lastEv = last // the first copy stays the reference
	return true
}
