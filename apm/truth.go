package apm

import (
	"github.com/apmwatch/apmwatch/event"
)

// Ground-truth readings (event.KindTruth) enter the state machine here.

// truthEvent applies a ground-truth reading (event.KindTruth): a row of
// the kernel's resource table, or a QP that vanished from it.
func (m *Model) truthEvent(ev *event.Event) {
	t := ev.Truth
	if t == nil || ev.QPN == 0 {
		m.stats.Ignored++
		return
	}
	key := m.keyOf(ev.Device, ev.QPN)
	switch t.Op {
	case event.TruthGone:
		if slot, q := m.get(key, false); q != nil {
			m.drop(slot, q)
		}
	case event.TruthRead:
		if !t.QPType.HasAPM() {
			m.stats.Ignored++
			return
		}
		slot, q := m.get(key, true)
		if q == nil {
			return
		}
		m.stats.Truths++
		if t.CM {
			q.flags |= fCM
		}
		m.reading(slot, q, ev)
	default:
		m.stats.Ignored++
	}
}

// reading compares a ground-truth reading with what the events made the
// model believe, then the belief follows the reading, unless an event after
// the reading's start changed it (the reading may predate that event).
func (m *Model) reading(slot int32, q *qp, ev *event.Event) {
	t := ev.Truth
	// The kernel's own record names the owning process: it wins over a
	// guess from events. A reading without a pid (a kernel QP) only fills
	// in a QP no event has named.
	if ev.PID != 0 || (q.pid == 0 && q.comm == 0 && ev.Comm != "") {
		q.pid, q.comm = ev.PID, m.comms.id(ev.Comm)
	}
	start := ev.Boot - min(t.Span, ev.Boot)
	q.ax().readAt = ev.Boot
	if t.Span == 0 {
		// An older recorder did not say how long its dump ran: the row
		// may have been read anywhere since the previous reading
		// (TestReadingWithoutSpan).
		x := q.ax()
		start, x.lastRead = x.lastRead, ev.Boot
	}
	m.shownByReading(slot, q, ev, start)
	if t.HasState && t.State == event.StateErr && q.state != event.StateErr && q.flags&fStateKnown != 0 {
		m.lost(q, ref{boot: ev.Boot}, t.Source+" reads ERR", true)
	}
	if l := q.lastMig(); l != nil && t.HasState && t.State != event.StateErr && t.State != event.StateReset {
		switch {
		case t.Mig == event.MigArmed && q.rearm.ok() && q.rearm.boot > l.at.boot && start >= q.rearm.boot:
			// REARM turned ARMED after the migration: a packet from the
			// peer came on the path the QP runs on, so that path works.
			l.proven = true
		case l.retriesOver() != 0 && start > l.at.boot+l.retriesOver():
			// Alive after every retry on that path would have run out:
			// the requests outstanding at the migration got through.
			l.proven = true
		}
	}
	if t.HasState && q.migAt <= start {
		if t.State == event.StateRTS && q.state != event.StateRTS {
			q.rtsAt = ev.Boot
		}
		m.toState(q, t.State)
	}
	if !t.HasState || (t.State != event.StateErr && t.State != event.StateReset) {
		// a dead QP's migration state says nothing of its rearms
		m.mismatchAfterMigration(slot, q, ev, start)
		m.mismatchAfterRearm(slot, q, ev, start)
	}
	m.stuckReading(q, ev)
	if q.migAt <= start {
		switch {
		case t.Mig != event.MigMigrated:
			q.flags |= fMigKnown | fArmed
		case q.mig != event.MigMigrated:
			// Something the tool did not see migrated it: the primary
			// is now what the alternate was, and no fresh alternate is
			// known.
			q.alt = route{}
		}
		q.mig = t.Mig
	}
}
