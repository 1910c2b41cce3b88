package apm

import (
	"github.com/apmwatch/apmwatch/event"
)

// This file is the state machine: which input changes what, in the
// kernel's and the HCA's order. Each finding is decided in its own file
// (see doc.go); the transitions here call them.

func (m *Model) event(ev *event.Event) {
	switch ev.Kind {
	case event.KindModify:
		if ev.Modify == nil || ev.QPN == 0 || !ev.Modify.QPType.HasAPM() {
			m.stats.Ignored++
			return
		}
		slot, q := m.get(m.keyOf(ev.Device, ev.QPN), true)
		if q == nil {
			return
		}
		m.owner(q, ev)
		m.returned(slot, q, ev)
		m.modify(slot, q, ev)
	case event.KindModifyEntry:
		if ev.Modify == nil || ev.QPN == 0 || !ev.Modify.QPType.HasAPM() {
			m.stats.Ignored++
			return
		}
		if _, q := m.get(m.keyOf(ev.Device, ev.QPN), true); q != nil {
			m.entered(q, ev)
		}
	case event.KindQPEvent:
		m.qpEvent(ev)
	case event.KindQPCreate:
		if ev.Life == nil || ev.Life.Ret != 0 || ev.QPN == 0 || !ev.Life.QPType.HasAPM() {
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
		q.flags = q.flags&^fArmed | fStateKnown | fMigKnown
		q.state, q.mig = event.StateReset, event.MigMigrated
		q.qpType = ev.Life.QPType
		m.owner(q, ev)
	case event.KindQPDestroy:
		if ev.Life == nil || ev.Life.Ret != 0 {
			m.stats.Ignored++
			return
		}
		if slot, q := m.get(m.keyOf(ev.Device, ev.QPN), false); q != nil {
			if q.state != event.StateErr {
				m.lost(q, refOf(ev), "destroyed", false)
			}
			m.drop(slot, q)
		}
	case event.KindCMNotify, event.KindCMHandler, event.KindMAD:
		m.cm(ev)
	case event.KindTruth:
		m.truthEvent(ev)
	case event.KindPortEvent:
		m.portEvent(ev)
	default:
		m.stats.Ignored++
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
	if ev.Modify != nil {
		q.qpType = ev.Modify.QPType
	}
}

// pathMig applies PATH_MIG. Only an ARMED QP can migrate (IBTA): on a QP
// with no rearm since its last migration the event is evidence (stale,
// duplicated, or the HCA reporting a migration that did not happen), never
// a new episode. The PATH_MIG of a migration software forced belongs to it.
func (m *Model) pathMig(slot int32, q *qp, ev *event.Event) {
	// The HCA only migrates a QP that is sending: it was in RTS.
	if q.flags&fStateKnown == 0 {
		q.state, q.flags = event.StateRTS, q.flags|fStateKnown
	}
	if m.forcedEvent(q, ev) {
		return
	}
	x := q.ax()
	if q.rearm.ok() && ev.Boot < q.rearm.boot && x.last.at.boot < ev.Boot {
		// A late PATH_MIG: the rearm that followed it was already
		// applied. The migration happened and was handled in time.
		m.flap(q, ev)
		x.last = lastMig{at: refOf(ev)}
		return
	}
	if !q.armed() {
		if ep := x.ep; ep != nil && !ep.stray.ok() {
			ep.stray = refOf(ev)
		}
		return
	}
	m.migrate(slot, q, ev, false)
}

// migrate starts an episode: the HCA (or software, forced) moved the QP to
// its alternate path. A migration copies (IBTA, rdmavt, cm_migrate, the mlx
// drivers): primary := alternate, and the alternate stays as it was, so
// afterwards both lead the same way and there is no fresh alternate until
// software loads one. (A firmware that zeroes the alternate instead leaves
// no valid one: the same for every rule here.)
func (m *Model) migrate(slot int32, q *qp, ev *event.Event, forced bool) {
	x := q.ax()
	m.endEpisode(q)
	ep := &episode{n: x.prev.n + 1, forced: forced, mig: refOf(ev)}
	x.ep = ep
	from, onto := q.primary, q.alt
	// Armed by a rearm without a new alternate: onto the path it runs on
	// (or onto nothing), whether or not the model knows that path.
	noAlt := x.unprot != nil && x.unprot.cause != 0 && !x.unprot.done && x.unprot.kind == RearmWithoutAlt
	x.last = lastMig{at: ep.mig, forced: forced, onto: onto,
		same: onto.valid() && onto.same(from) || noAlt, stale: m.portDown(q, onto, ev.Boot)}
	if onto.valid() {
		q.primary = onto
	}
	q.mig, q.migAt, q.flags = event.MigMigrated, ev.Boot, q.flags&^fArmed|fMigKnown
	m.stuckRestart(q, ep.mig, true)
	if !x.last.same {
		// It migrated, so it was armed, onto another path: protected. A
		// QP armed onto the path it ran on (a rearm with no new alternate
		// after a copy) "migrates" onto the path that failed: what left it
		// unprotected still stands.
		m.protected(q)
	}
	if !forced {
		m.flap(q, ev) // software moving the QP is no path failing
	}
	m.wake(slot, q, ev.Boot+uint64(min(m.cfg.RearmDeadline, m.cfg.NotifyDeadline)))
}

// endEpisode keeps only the summary of the current episode.
func (m *Model) endEpisode(q *qp) {
	x := q.x
	if x == nil || x.ep == nil {
		return
	}
	ep := x.ep
	if ep.mis != nil {
		m.checkMismatch(q, ep, ep.mis.read+uint64(m.cfg.TruthGrace))
	}
	if ep.bareRearm.ok() {
		m.emitNoAlt(q, ep, ep.bareRearm, false) // no load came: it stays a rearm onto the stale alternate
	}
	x.prev = epSummary{n: ep.n, rearmed: ep.rearm.ok(), rearmNoAlt: ep.done&(dNoAlt|dLapOrder) != 0, forced: ep.forced}
	x.ep = nil
}

// toState moves the QP to a state outside a modify (an error event, a
// reading). ERR and RESET end the episode: the connection is gone.
func (m *Model) toState(q *qp, st event.QPState) {
	q.state, q.flags = st, q.flags|fStateKnown
	if st == event.StateErr || st == event.StateReset {
		m.endEpisode(q)
	}
}

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
		if md.State == event.StateErr || md.State == event.StateReset {
			if prev != event.StateErr && prev != event.StateReset {
				m.lost(q, refOf(ev), "modify to "+md.State.String(), false)
			}
		}
		m.toState(q, md.State)
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
			m.rearmed(slot, q, ev)
		case event.MigMigrated:
			m.forceMigrated(slot, q, ev, prev)
		case event.MigArmed:
			m.armedByModify(slot, q, ev)
		default:
			q.mig, q.flags = md.MigState, q.flags|fMigKnown
		}
	}
	if q.state == event.StateRTS && prev != event.StateRTS {
		q.rtsAt = ev.Boot
		if prev == event.StateSQD || prev == event.StateSQE {
			m.wake(slot, q, ev.Boot) // deadlines that waited for RTS again
		}
	}
	m.armWatch(slot, q)
}

// reset: a QP moved to RESET forgets its paths and APM state; its
// generation (and so its findings' key) stays.
func (m *Model) reset(q *qp) {
	q.primary, q.alt = route{}, route{}
	q.altLoad, q.rearm = ref{}, ref{}
	q.mig, q.flags = event.MigMigrated, q.flags&^fArmed|fMigKnown
	q.rtsAt = 0
	if x := q.x; x != nil {
		x.ep = nil
		x.last = lastMig{} // a new connection: the old migration judges nothing in it
		x.lapRecv = ref{}
		x.rearmSince, x.stuckID = 0, 0
		x.pendTruth, x.migErrAt = 0, 0
	}
}

// deadlines judges every time-bound rule of q at at (the deadline's own
// time) and schedules the next wake-up.
func (m *Model) deadlines(slot int32, q *qp, at uint64) {
	var next uint64
	want := func(t uint64) {
		if t > at && (next == 0 || t < next) {
			next = t
		}
	}
	if ep := q.episode(); ep != nil {
		want(m.checkMissed(q, ep, at))
		want(m.checkNotify(q, ep, at))
		want(m.checkBareRearm(q, ep, at))
		want(m.checkMismatch(q, ep, at))
		want(m.checkLinger(q, ep, at))
	}
	want(m.checkLAPStuck(q, at))
	want(m.checkRearmTruth(q, at))
	want(m.checkNeverArmed(q, at))
	if next != 0 {
		m.wake(slot, q, next)
	}
}

// checkLinger ends a rearmed episode once neither the linger window (a late
// alternate load, lap-race) nor the notify deadline needs it.
func (m *Model) checkLinger(q *qp, ep *episode, at uint64) uint64 {
	if !ep.rearm.ok() {
		return 0
	}
	end := max(ep.rearm.boot+uint64(m.cfg.EpisodeLinger), ep.mig.boot+uint64(m.cfg.NotifyDeadline))
	if hold := m.callHold(q, end, at, holdLoad); hold != 0 && at >= end {
		return hold // a load in progress may still belong to the episode (calls.go)
	}
	if at >= end {
		m.endEpisode(q)
		return 0
	}
	return end
}
