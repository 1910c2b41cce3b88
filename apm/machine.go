package apm

import (
	"fmt"

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
		m.modify(slot, q, ev)
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
			if t, ok := m.portFailed(q, ev.Boot); ok && q.state != event.StateErr {
				m.failed(q, refOf(ev), fmt.Sprintf("destroyed %v after PORT_ERR on port %d", since(t, ev.Boot), q.primary.port))
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
	case event.EvCommEst:
		if ep := q.episode(); ep != nil && !ep.commEst.ok() && ev.Boot >= ep.mig.boot {
			ep.commEst = refOf(ev)
		}
	case event.EvQPFatal, event.EvQPReqErr, event.EvQPAccessErr:
		if q.state != event.StateErr {
			m.failed(q, refOf(ev), ev.QP.Type.String())
		}
		m.toState(q, event.StateErr)
	}
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

// pathMig applies PATH_MIG. Only an ARMED QP can migrate (IBTA): on a QP
// with no rearm since its last migration the event is evidence (stale,
// duplicated, or the HCA reporting a migration that did not happen), never
// a new episode. The PATH_MIG of a migration software forced belongs to it.
func (m *Model) pathMig(slot int32, q *qp, ev *event.Event) {
	// The HCA only migrates a QP that is sending: it was in RTS.
	if q.flags&fStateKnown == 0 {
		q.state, q.flags = event.StateRTS, q.flags|fStateKnown
	}
	x := q.ax()
	if l := &x.last; l.forced && !l.event && ev.Boot >= l.at.boot && ev.Boot-l.at.boot <= uint64(m.cfg.RearmDeadline) {
		l.event = true
		if ep := x.ep; ep != nil && ep.mig == l.at {
			ep.event = refOf(ev)
		}
		return
	}
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

// migrate starts an episode: the HCA (or software, forced) swapped to the
// alternate path, which is now the primary; there is no alternate any more.
func (m *Model) migrate(slot int32, q *qp, ev *event.Event, forced bool) {
	x := q.ax()
	m.endEpisode(q)
	ep := &episode{n: x.prev.n + 1, forced: forced, mig: refOf(ev)}
	x.ep = ep
	x.last = lastMig{at: ep.mig, forced: forced}
	if q.alt.valid() {
		q.primary = q.alt
	}
	q.alt = route{}
	q.mig, q.migAt, q.flags = event.MigMigrated, ev.Boot, q.flags&^fArmed|fMigKnown
	m.stuckRestart(q, ep.mig, true)
	m.protected(q) // it migrated: it was armed
	m.flap(q, ev)
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
			if t, ok := m.portFailed(q, ev.Boot); ok && prev != event.StateErr && prev != event.StateReset {
				m.failed(q, refOf(ev), fmt.Sprintf("modify to %s %v after PORT_ERR on port %d", md.State, since(t, ev.Boot), q.primary.port))
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
			// Forcing MIGRATED on a QP that had an armed (or arming)
			// alternate makes the HCA move to it: a migration done by
			// software. On a QP already MIGRATED it changes nothing.
			if q.armed() && (prev == event.StateRTS || prev == event.StateSQD) {
				m.migrate(slot, q, ev, true)
			}
			q.mig, q.flags = event.MigMigrated, q.flags&^fArmed|fMigKnown
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
	if ep.commEst.ok() && q.flags&fCM != 0 {
		m.lapWindow(q, ep, refOf(ev), "the new alternate path was loaded")
	}
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
	q.flags &^= fMigErrDone
	q.mig, q.migAt, q.flags = event.MigRearm, ev.Boot, q.flags|fMigKnown|fArmed
	m.stuckRestart(q, q.rearm, false)
	if ep == nil && q.alt.valid() && !q.alt.same(q.primary) {
		m.protected(q, NeverArmed, RearmWithoutAlt) // armed onto a loaded alternate
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

// reset: a QP moved to RESET forgets its paths and APM state; its
// generation (and so its findings' key) stays.
func (m *Model) reset(q *qp) {
	q.primary, q.alt = route{}, route{}
	q.altLoad, q.rearm = ref{}, ref{}
	q.mig, q.flags = event.MigMigrated, q.flags&^fArmed|fMigKnown
	q.rtsAt = 0
	if x := q.x; x != nil {
		x.ep = nil
		x.lapRecv = ref{}
		x.rearmSince, x.stuckID = 0, 0
		x.pendTruth = 0
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
	if at >= end {
		m.endEpisode(q)
		return 0
	}
	return end
}

// ourCommID is the local communication id of this host's side in a CM
// event: ib_cm_notify knows its cm_id; a MAD we send carries ours as its
// local id, a MAD we receive (and the handler that runs on it) as its
// remote id.
func ourCommID(ev *event.Event) uint32 {
	switch {
	case ev.Notify != nil:
		return ev.Notify.LocalID
	case ev.Handler != nil:
		return ev.Handler.RemoteID
	case ev.MAD != nil && ev.MAD.Dir == event.MADSend:
		return ev.MAD.LocalID
	case ev.MAD != nil:
		return ev.MAD.RemoteID
	}
	return 0
}

// cmQP ties a CM event to a QP generation: by the QPN on the event when the
// source knows it (QPN 1 is the GSI QP the MAD travelled on, not the
// connection's), else by the local communication id learnt from an earlier
// event that had both. A comm id seen with a new QP is the new QP's.
func (m *Model) cmQP(ev *event.Event) (int32, *qp) {
	local := ourCommID(ev)
	dev := uint64(m.devID(ev.Device))
	if ev.QPN > 1 {
		key := dev<<32 | uint64(ev.QPN)
		slot, q := m.get(key, true)
		if q != nil && local != 0 {
			x := q.ax()
			if x.commID != local {
				if b := m.cmIDs[dev<<32|uint64(x.commID)]; x.commID != 0 && b.key == q.key && b.gen == q.gen {
					delete(m.cmIDs, dev<<32|uint64(x.commID))
				}
				x.commID = local
			}
			m.cmIDs[dev<<32|uint64(local)] = cmBound{key: key, gen: q.gen}
		}
		return slot, q
	}
	if local != 0 {
		if b, ok := m.cmIDs[dev<<32|uint64(local)]; ok {
			if slot, q := m.get(b.key, false); q != nil && q.gen == b.gen {
				return slot, q
			}
		}
	}
	return -1, nil
}

// cm applies ib_cm_notify, the CM's LAP/APR handlers and CM MADs. Any of
// them that carries its payload and is tied to a QP marks it CM-managed.
func (m *Model) cm(ev *event.Event) {
	switch {
	case ev.Kind == event.KindCMNotify && ev.Notify != nil,
		ev.Kind == event.KindCMHandler && ev.Handler != nil,
		ev.Kind == event.KindMAD && ev.MAD != nil && ev.MAD.MgmtClass == event.MgmtClassCM:
	default:
		m.stats.Ignored++
		return
	}
	slot, q := m.cmQP(ev)
	if q == nil {
		m.stats.Unattributed++
		return
	}
	q.flags |= fCM
	ep := q.episode()
	switch {
	case ev.Notify != nil:
		m.cmNotify(q, ep, ev)
	case ev.Handler != nil:
		if ev.Handler.AttrID == event.CMAttrLAP {
			if ev.Handler.Ret == 0 {
				m.lapReceived(slot, q, ep, refOf(ev))
			} else {
				m.lapRefused(q, ep)
			}
		}
	case ev.MAD.AttrID == event.CMAttrLAP && ev.MAD.Dir == event.MADRecv:
		m.lapReceived(slot, q, ep, refOf(ev))
	case ev.MAD.AttrID == event.CMAttrLAP && ev.MAD.Dir == event.MADSend:
		m.lapSent(q, ep, ev)
	case ev.MAD.AttrID == event.CMAttrAPR && ev.MAD.Dir == event.MADSend:
		m.aprSent(q, ev)
	}
}

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
	if t.HasState && t.State == event.StateErr && q.state != event.StateErr && q.flags&fStateKnown != 0 {
		m.failed(q, ref{boot: ev.Boot}, t.Source+" reads ERR")
	}
	if t.HasState && q.migAt <= start {
		if t.State == event.StateRTS && q.state != event.StateRTS {
			q.rtsAt = ev.Boot
		}
		m.toState(q, t.State)
	}
	m.mismatchAfterMigration(slot, q, ev, start)
	m.mismatchAfterRearm(slot, q, ev, start)
	m.stuckReading(q, ev)
	if q.migAt <= start {
		switch {
		case t.Mig != event.MigMigrated:
			q.flags |= fMigKnown | fArmed
		case q.mig != event.MigMigrated:
			q.alt = route{} // whatever moved it, MIGRATED has no armed alternate
		}
		q.mig = t.Mig
	}
}
