package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// never-armed: a loaded alternate does nothing until the QP is armed. A QP
// in RTS with an alternate loaded, still MIGRATED and outside an episode,
// for ArmDeadline: once per generation.

const remedyNeverArm = "rearm (RTS->RTS IB_QP_PATH_MIG_STATE=REARM) after loading the alternate path: a loaded alternate is not used until the QP is ARMED"

// armWatch schedules the never-armed check.
func (m *Model) armWatch(slot int32, q *qp) {
	if q.flags&fNeverArmedDone != 0 || !unarmed(q) {
		return
	}
	m.wake(slot, q, max(q.altLoad.boot, q.rtsAt)+uint64(m.cfg.ArmDeadline))
}

func unarmed(q *qp) bool {
	// a QP first seen mid-stream has an unknown migration state, not MIGRATED
	return q.state == event.StateRTS && q.alt.valid() && q.flags&fMigKnown != 0 && q.mig == event.MigMigrated && q.episode() == nil
}

// checkNeverArmed judges the arm deadline at at.
func (m *Model) checkNeverArmed(q *qp, at uint64) uint64 {
	if q.flags&fNeverArmedDone != 0 || !unarmed(q) {
		return 0
	}
	from := max(q.altLoad.boot, q.rtsAt)
	dl := from + uint64(m.cfg.ArmDeadline)
	if at < dl {
		return dl
	}
	if hold := m.callHold(q, dl, at, holdArm); hold != 0 {
		return hold // a rearm may be in progress (calls.go)
	}
	q.flags |= fNeverArmedDone
	id := m.emit(q, Finding{Kind: NeverArmed, Remediation: remedyNeverArm, Last: dl, First: from,
		Evidence:    []Evidence{evd(q.altLoad, "alternate load (no rearm followed)")},
		Explanation: fmt.Sprintf("the QP has been in RTS with an alternate path (%s) loaded for %v and was never rearmed, so it still reads MIGRATED and cannot fail over", q.alt, m.cfg.ArmDeadline)})
	m.markUnprotected(q, from, id, NeverArmed)
	return 0
}
