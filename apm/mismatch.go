package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// mig-state-mismatch: a ground-truth reading (rdma netlink's path-mig-state,
// or a query) that contradicts the events, judged only where the reading
// cannot predate what it contradicts (a dump reads one QP after another: a
// reading stands for some instant between its start and its stamp):
//   - after a migration nobody rearmed, the QP must read MIGRATED; a reading
//     that started after the migration and shows REARM or ARMED is a
//     mismatch, explained from the QP's history, unless a rearm stamped
//     before the reading still arrives within TruthGrace;
//   - after a rearm and no migration, the QP must not read MIGRATED; the
//     PATH_MIG may still be on its way, so that is judged TruthGrace later.
//     A reading that started before the rearm call returned (a firmware
//     command takes its time: Modify.Took) may show the state before it.

const remedyMismatch = "query the QP after each PATH_MIG and redo the three steps only from a known state: " + stepsRemedy

// pendingMismatch is a reading that contradicts an open episode, waiting
// TruthGrace for a rearm that came before it but is still on its way (a
// busy host's ring buffer can hold an event longer than the reorder window).
type pendingMismatch struct {
	read  uint64
	truth event.Truth
}

// mismatchAfterMigration notes a reading in an episode not yet rearmed;
// checkMismatch judges it after TruthGrace.
func (m *Model) mismatchAfterMigration(slot int32, q *qp, ev *event.Event, start uint64) {
	t := ev.Truth
	ep := q.episode()
	if ep == nil || ep.rearm.ok() || t.Mig == event.MigMigrated || ep.mig.boot > start || ep.done&dMismatch != 0 || ep.mis != nil {
		return
	}
	ep.mis = &pendingMismatch{read: ev.Boot, truth: *t}
	if m.cfg.TruthGrace == 0 {
		m.checkMismatch(q, ep, ev.Boot)
		return
	}
	m.wake(slot, q, ev.Boot+uint64(m.cfg.TruthGrace))
}

// checkMismatch judges a pending reading of an open episode at at.
func (m *Model) checkMismatch(q *qp, ep *episode, at uint64) uint64 {
	p := ep.mis
	if p == nil {
		return 0
	}
	if dl := p.read + uint64(m.cfg.TruthGrace); at < dl {
		return dl
	}
	if hold := m.callHold(q, p.read, at, holdArm); hold != 0 {
		return hold // a rearm entered before the reading may still return (calls.go)
	}
	ep.mis = nil
	if ep.rearm.ok() && ep.rearm.boot <= p.read {
		return 0 // the rearm the reading shows came late
	}
	if t := m.lossText(ep.mig.boot, p.read); t != "" {
		m.rearmedUnseen(q, ep, p, t)
		return 0
	}
	ep.done |= dMismatch
	evs := []Evidence{evd(ep.mig, migWhat(ep))}
	if ep.stray.ok() {
		evs = append(evs, evd(ep.stray, "PATH_MIG again, with no rearm since"))
	}
	m.emit(q, Finding{Kind: MigStateMismatch, Remediation: remedyMismatch, Last: p.read,
		Evidence:    append(evs, evd(ref{boot: p.read}, p.truth.Source+" reads "+p.truth.Mig.String())),
		Explanation: afterMigCause(q, ep, &p.truth)})
	return 0
}

// afterMigCause explains a QP that does not read MIGRATED after a
// migration, most specific history first.
func afterMigCause(q *qp, ep *episode, t *event.Truth) string {
	head := fmt.Sprintf("after %s %d the QP reads %s, not MIGRATED", migWhat(ep), ep.n, t.Mig)
	switch {
	case ep.stray.ok():
		return head + ": a further PATH_MIG came with no rearm in between, and only an ARMED QP can migrate, so that event was stale or duplicated, not a transition"
	case q.x.prev.n > 0 && q.x.prev.rearmNoAlt:
		return head + ": the previous migration was rearmed without a new alternate, so this is likely the second transition after a rearm that never completed the three steps (LAP, new alternate, rearm)"
	case t.Mig == event.MigRearm:
		return head + ": a rearm the tool did not see (another process, or an untraced path such as DevX) rearmed it"
	}
	return head + ": PATH_MIG without migration (the HCA raised the event but the QP never migrated)"
}

// mismatchAfterRearm notes a MIGRATED reading after a rearm with no
// migration seen since; checkRearmTruth judges it after TruthGrace.
func (m *Model) mismatchAfterRearm(slot int32, q *qp, ev *event.Event, start uint64) {
	if ev.Truth.Mig != event.MigMigrated || !q.rearm.ok() || start <= q.rearm.boot {
		return
	}
	if q.x != nil && start <= q.x.rearmEnd {
		return // read while the rearm call ran: the HCA may not have taken it yet
	}
	x := q.ax()
	if x.last.at.boot >= q.rearm.boot || x.truthRearm == q.rearm || x.pendTruth != 0 {
		return
	}
	x.truthRearm, x.pendRearm, x.pendTruth = q.rearm, q.rearm, ev.Boot
	if m.cfg.TruthGrace == 0 {
		m.checkRearmTruth(q, ev.Boot)
		return
	}
	m.wake(slot, q, ev.Boot+uint64(m.cfg.TruthGrace))
}

// checkRearmTruth decides a MIGRATED reading after a rearm once the grace
// for its PATH_MIG has passed.
func (m *Model) checkRearmTruth(q *qp, at uint64) uint64 {
	x := q.x
	if x == nil || x.pendTruth == 0 {
		return 0
	}
	if dl := x.pendTruth + uint64(m.cfg.TruthGrace); at < dl {
		return dl
	}
	read, r := x.pendTruth, x.pendRearm
	x.pendTruth = 0
	if x.last.at.boot > r.boot {
		return 0 // a migration came and explains the reading
	}
	if m.lossText(r.boot, read) != "" {
		return 0 // the PATH_MIG that explains it may be among the lost records
	}
	m.emit(q, Finding{Kind: MigStateMismatch, Remediation: remedyMismatch, Last: read,
		Evidence:    []Evidence{evd(r, "rearm"), evd(ref{boot: read}, "ground truth reads MIGRATED")},
		Explanation: fmt.Sprintf("the QP was rearmed and %v later reads MIGRATED with no migration seen in between: the HCA migrated without a PATH_MIG the tool saw (the event goes only to the owner, or a hook is missing), or software forced MIGRATED unseen; likely the rearm armed onto a path that never came back", since(r.boot, read))})
	return 0
}
