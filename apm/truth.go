package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// truth applies a ground-truth reading: it is compared with what the
// events made the model believe, then the belief follows the truth.
func (m *Model) truth(t *Truth) {
	if t.QPN == 0 {
		m.stats.Ignored++
		return
	}
	slot, q := m.get(m.keyOf(t.Device, t.QPN), true)
	if q == nil {
		return
	}
	// The kernel's own record names the owning process: it wins over a
	// guess from events. A reading without a pid (a kernel QP) only fills
	// in a QP no event has named.
	if t.PID != 0 || (q.pid == 0 && q.comm == 0 && t.Comm != "") {
		q.pid, q.comm = t.PID, m.comms.id(t.Comm)
	}
	if t.HasState {
		if t.State == event.StateRTS && q.state != event.StateRTS {
			q.rtsAt = t.At
		}
		q.state, q.flags = t.State, q.flags|fStateKnown
	}
	rd := ref{boot: t.At}
	// After a migration nobody rearmed, the QP must read MIGRATED.
	if x := q.x; x != nil && x.ep != nil {
		ep := x.ep
		if !ep.rearm.ok() && t.Mig != event.MigMigrated && t.At >= ep.mig.boot && ep.done&dMismatch == 0 {
			ep.done |= dMismatch
			m.emit(q, Finding{Kind: MigStateMismatch, Severity: SevWarning, Remediation: remedyMismatch,
				Last:        t.At,
				Evidence:    []Evidence{evd(ep.mig, migWhat(ep)), evd(rd, t.Source+" reads "+t.Mig.String())},
				Explanation: m.afterMigCause(q, x, ep, t)})
		}
	}
	// After a rearm and no migration, the QP must not read MIGRATED; the
	// PATH_MIG may still be on its way: judge after TruthGrace.
	if t.Mig == event.MigMigrated && q.rearm.ok() && t.At > q.rearm.boot {
		x := q.ax()
		if x.lastMig.boot < q.rearm.boot && x.truthRearm != q.rearm && x.pendTruth == 0 {
			x.truthRearm, x.pendRearm, x.pendTruth = q.rearm, q.rearm, t.At
			if m.cfg.TruthGrace == 0 {
				m.judgeRearmTruth(q, x)
			} else {
				m.wake(slot, q, t.At+uint64(m.cfg.TruthGrace))
			}
		}
	}
	// stuck-rearm: REARM for longer than the threshold.
	if t.Mig == event.MigRearm {
		x := q.ax()
		if x.rearmSince == 0 {
			x.rearmSince = t.At
			if q.mig == event.MigRearm && q.rearm.ok() && q.rearm.boot <= t.At {
				x.rearmSince = q.rearm.boot
			}
		}
		if x.stuckID == 0 && t.At-x.rearmSince > uint64(m.cfg.StuckRearm) {
			ev := []Evidence{evd(rd, t.Source+" reads REARM")}
			if q.rearm.ok() && q.rearm.boot == x.rearmSince {
				ev = append([]Evidence{evd(q.rearm, "rearm")}, ev...)
			}
			x.stuckID = m.emit(q, Finding{Kind: StuckRearm, Severity: SevWarning, Remediation: remedyStuck,
				First: x.rearmSince, Last: t.At, Evidence: ev,
				Explanation: fmt.Sprintf("the QP has read REARM for %v (limit %v) and never became ARMED: the peer has not rearmed or no traffic flows", since(x.rearmSince, t.At), m.cfg.StuckRearm)})
		}
	} else if x := q.x; x != nil {
		if x.stuckID != 0 {
			m.emit(q, Finding{Kind: StuckRearm, Severity: SevInfo, Resolved: true, Resolves: x.stuckID,
				First: x.rearmSince, Last: t.At, Remediation: remedyStuck,
				Evidence:    []Evidence{evd(rd, t.Source+" reads "+t.Mig.String())},
				Explanation: fmt.Sprintf("the QP left REARM after %v and reads %s", since(x.rearmSince, t.At), t.Mig)})
		}
		x.rearmSince, x.stuckID = 0, 0
	}
	if t.Mig == event.MigMigrated && q.mig != event.MigMigrated {
		q.alt = route{} // whatever moved it, MIGRATED has no armed alternate
	}
	q.mig = t.Mig
}

// truthEvent applies a ground-truth reading that came in the event stream
// (event.KindTruth, from a source that polls rdma netlink): a reading is a
// Truth (and a MarkCM when a cm_id is bound to the QP), a vanished QP is a
// Gone.
func (m *Model) truthEvent(ev *event.Event) {
	t := ev.Truth
	if t == nil || ev.QPN == 0 {
		m.stats.Ignored++
		return
	}
	k := event.QPKey{Device: ev.Device, QPN: ev.QPN}
	switch t.Op {
	case event.TruthGone:
		m.gone(&k)
	case event.TruthRead:
		if !tracked(t.QPType) {
			m.stats.Ignored++
			return
		}
		if t.CM {
			m.markCM(&k)
		}
		m.stats.Truths++
		m.truth(&Truth{Device: ev.Device, QPN: ev.QPN, Mig: t.Mig, State: t.State, HasState: t.HasState,
			At: ev.Boot, Source: t.Source, PID: ev.PID, Comm: ev.Comm})
	default:
		m.stats.Ignored++
	}
}

// afterMigCause explains a QP that does not read MIGRATED after a migration,
// from its history (the seed thread's diagnosis first).
func (m *Model) afterMigCause(q *qp, x *aux, ep *episode, t *Truth) string {
	head := fmt.Sprintf("after %s %d the QP reads %s, not MIGRATED", migWhat(ep), ep.n, t.Mig)
	switch {
	case x.prev.n > 0 && x.prev.rearmNoAlt:
		return head + ": the previous migration was rearmed without a new alternate, so this is likely the second transition after a rearm that never completed the three steps (LAP, new alternate, rearm)"
	case x.prev.n > 0 && !x.prev.rearmed:
		return head + ": the previous migration was never rearmed, so a second PATH_MIG is not a real transition; the event is likely stale or duplicated"
	case t.Mig == event.MigArmed || t.Mig == event.MigRearm:
		return head + ": a rearm the tool did not see (another process, an untraced path such as DevX) rearmed it, or the PATH_MIG came from an earlier transition"
	}
	return head + ": the HCA reported PATH_MIG without moving the migration state (the seed's symptom)"
}

// judgeRearmTruth decides a MIGRATED reading after a rearm once the grace
// for its PATH_MIG has passed.
func (m *Model) judgeRearmTruth(q *qp, x *aux) {
	at, r := x.pendTruth, x.pendRearm
	x.pendTruth = 0
	if x.lastMig.boot > r.boot {
		return // a migration came and explains the reading
	}
	m.emit(q, Finding{Kind: MigStateMismatch, Severity: SevWarning, Remediation: remedyMismatch,
		Last:        at,
		Evidence:    []Evidence{evd(r, "rearm"), evd(ref{boot: at}, "ground truth reads MIGRATED")},
		Explanation: fmt.Sprintf("the QP was rearmed and %v later reads MIGRATED with no migration seen in between: the HCA migrated without a PATH_MIG the tool saw (the event goes only to the owner, or a hook is missing), or software forced MIGRATED unseen; likely the rearm armed onto a path that never came back", since(r.boot, at))})
}
