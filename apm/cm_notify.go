package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// cm-not-notified: a CM-managed QP (a CM event was tied to it, or rdma
// netlink lists a cm_id bound to it) must report each migration with
// ib_cm_notify(cm_id, IB_EVENT_PATH_MIG) (rdma_notify with rdma_cm), or the
// CM keeps sending DREQ and LAP on the dead path. No notify within
// NotifyDeadline of the migration is a finding, unless the QP went to ERR.
// A notify refused with EINVAL is a lap-race (lap_race.go), and so is one
// that succeeded after a LAP crossed it.

const remedyNotify = "call ib_cm_notify(cm_id, IB_EVENT_PATH_MIG) (rdma_notify with rdma_cm) from the PATH_MIG handler so the CM switches to the new path, then " + stepsRemedy

// cmNotify applies one ib_cm_notify call.
func (m *Model) cmNotify(q *qp, ep *episode, ev *event.Event) {
	n := ev.Notify
	switch n.Type {
	case event.EvPathMig:
		if ep != nil && !ep.notify.ok() && ev.Boot >= ep.mig.boot {
			ep.notify = refOf(ev)
		}
		if n.Ret == errEINVAL {
			m.notifyRefused(q, ep, ev)
		}
		if n.Ret == 0 && ep != nil && ep.lapRecv.ok() && ep.lapRecv.boot <= ev.Boot && ep.done&dLapWindow == 0 {
			m.lapWindow(q, ep, ev)
		}
	}
	// ib_cm_notify(COMM_EST) only ties the cm_id to the QP (cm.go): it
	// moves a cm_id from REP_SENT to ESTABLISHED (the first packet in RTR)
	// and returns -EISCONN on an established one, so it never marks a
	// migrated path.
}

// checkNotify judges the notify deadline at at.
func (m *Model) checkNotify(q *qp, ep *episode, at uint64) uint64 {
	if ep.done&dNotNotified != 0 || ep.notify.ok() {
		return 0
	}
	dl := ep.mig.boot + uint64(m.cfg.NotifyDeadline)
	if at < dl {
		return dl
	}
	ep.done |= dNotNotified
	if m.unwatchedOver(ep.mig.boot, dl) != 0 {
		return 0 // a notify while apmwatch was not running is not seen, and no reading shows one
	}
	if q.flags&fCM != 0 && q.state != event.StateErr {
		m.emit(q, Finding{Kind: CMNotNotified, Remediation: remedyNotify, Last: dl,
			Evidence:    []Evidence{evd(ep.mig, migWhat(ep))},
			Explanation: fmt.Sprintf("migration %d of a CM-managed QP was not reported with ib_cm_notify(PATH_MIG) within %v, so the CM keeps the dead path for DREQ and LAP", ep.n, m.cfg.NotifyDeadline)})
	}
	return 0
}
