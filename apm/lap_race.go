package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// lap-race: after a migration the CM must learn of it (ib_cm_notify
// PATH_MIG, which makes cm_migrate copy its alternate into its primary) and
// the steps must come in order: LAP and new alternate, then rearm. Four
// ways to lose, each once per episode, each resting on a source:
//   - notify (ib_cm code): ib_cm_notify(PATH_MIG) returned EINVAL:
//     cm_migrate needs the cm_id ESTABLISHED and lap_state UNINIT or IDLE,
//     so with a LAP in flight the CM keeps the dead path;
//   - window (ib_cm code): a LAP the CM accepted after the migration and
//     before a successful ib_cm_notify(PATH_MIG): cm_lap_handler put the
//     LAP's path in the cm_id's alternate, so the notify copied that new
//     path, not the one the QP moved onto, into the CM's primary (the
//     window from the migration to the notify must hold no LAP);
//   - order (IBTA, rdmavt): the rearm came first and the alternate load
//     follows within EpisodeLinger (steps 2 and 3 swapped): a migration
//     copies the alternate in force, so in between the QP is armed onto
//     the path it runs on;
//   - stuck (ib_cm code): a LAP the CM accepted is not answered with an
//     APR within LAPDeadline (the cm_id stays in LAP_RCVD; rdma_cm drops
//     the event; kernels since 5.6 cannot send an APR at all).
// A LAP the CM refused (cm_lap_handler returned an error) is no race. There
// is no COMM_EST after a migration (IBTA: only for the first packet in
// RTR), so nothing here waits for one.

const remedyLAP = "tell the CM first: call ib_cm_notify(PATH_MIG) (rdma_notify) from the PATH_MIG handler before any LAP is taken, then send the LAP and load the new alternate, then rearm; answer every received LAP with an APR; " + stepsRemedy

// errEINVAL is -EINVAL as the kernel returns it.
const errEINVAL = -22

// lapWindow judges a successful ib_cm_notify(PATH_MIG) that a LAP, taken by
// the CM since the migration, came before.
func (m *Model) lapWindow(q *qp, ep *episode, ev *event.Event) {
	ep.done |= dLapWindow
	m.emit(q, Finding{Kind: LAPRace, Remediation: remedyLAP,
		Evidence: []Evidence{evd(ep.mig, migWhat(ep)), evd(ep.lapRecv, "LAP received"), evd(refOf(ev), "ib_cm_notify(PATH_MIG) = 0")},
		Explanation: fmt.Sprintf("a LAP reached the CM %v after %s %d and before ib_cm_notify(PATH_MIG), so the notify made the LAP's new path, not the one the QP moved onto, the CM's primary (cm_migrate copies the cm_id's alternate, which the LAP had just replaced)",
			since(ep.mig.boot, ep.lapRecv.boot), migWhat(ep), ep.n)})
}

// lapOrder judges an alternate load that comes after the episode's rearm:
// steps 2 and 3 swapped when the rearm was bare (no load before it) and
// the load follows within EpisodeLinger. (A further load after a proper
// rearm is allowed: the spec lets software change the alternate while
// ARMED.)
func (m *Model) lapOrder(q *qp, ep *episode, ev *event.Event) {
	if !ep.bareRearm.ok() || ev.Boot-ep.bareRearm.boot > uint64(m.cfg.EpisodeLinger) {
		return
	}
	ep.bareRearm = ref{}
	ep.done |= dLapOrder
	m.emit(q, Finding{Kind: LAPRace, Remediation: remedyLAP,
		Evidence:    []Evidence{evd(ep.mig, migWhat(ep)), evd(ep.rearm, "rearm"), evd(refOf(ev), "alternate load")},
		Explanation: fmt.Sprintf("the rearm came %v before the new alternate path was loaded in migration %d (steps 2 and 3 swapped): in between the QP could arm onto the stale alternate", since(ep.rearm.boot, ev.Boot), ep.n)})
}

// lapReceived notes a LAP addressed to this side: from the MAD on the wire
// or from cm_lap_handler's success (the same LAP seen twice is one).
func (m *Model) lapReceived(slot int32, q *qp, ep *episode, r ref) {
	x := q.ax()
	if x.lapRecv.ok() {
		return
	}
	x.lapRecv, x.lapStuckID = r, 0
	m.wake(slot, q, r.boot+uint64(m.cfg.LAPDeadline))
	if ep != nil && !ep.lapRecv.ok() && r.boot >= ep.mig.boot {
		ep.lapRecv = r // judged at the notify (lapWindow)
	}
}

// lapRefused: cm_lap_handler returned an error, so the CM did not take the
// LAP (not ESTABLISHED, a RoCE port, a bad message): the cm_id's lap_state
// did not change and no APR is owed. Forget the LAP the MAD showed.
func (m *Model) lapRefused(q *qp, ep *episode) {
	x := q.x
	if x == nil || !x.lapRecv.ok() || x.lapStuckID != 0 {
		return
	}
	if ep != nil && ep.lapRecv == x.lapRecv {
		ep.lapRecv = ref{}
	}
	x.lapRecv = ref{}
}

func (m *Model) aprSent(q *qp, ev *event.Event) {
	x := q.x
	if x == nil || !x.lapRecv.ok() {
		return
	}
	if x.lapStuckID != 0 {
		m.emit(q, Finding{Kind: LAPRace, Severity: SevInfo, Resolved: true, Resolves: x.lapStuckID,
			First: x.lapRecv.boot, Last: max(ev.Boot, x.lapRecv.boot+uint64(m.cfg.LAPDeadline)), Remediation: remedyLAP,
			Evidence:    []Evidence{evd(x.lapRecv, "LAP received"), evd(refOf(ev), "APR sent")},
			Explanation: fmt.Sprintf("the LAP was answered with an APR after %v", since(x.lapRecv.boot, ev.Boot))})
	}
	x.lapRecv, x.lapStuckID = ref{}, 0
}

// checkLAPStuck judges an unanswered LAP at at.
func (m *Model) checkLAPStuck(q *qp, at uint64) uint64 {
	x := q.x
	if x == nil || !x.lapRecv.ok() || x.lapStuckID != 0 {
		return 0
	}
	dl := x.lapRecv.boot + uint64(m.cfg.LAPDeadline)
	if at < dl {
		return dl
	}
	if m.unwatchedOver(x.lapRecv.boot, dl) != 0 {
		x.lapRecv = ref{} // an APR sent while apmwatch was not running is not seen
		return 0
	}
	x.lapStuckID = m.emit(q, Finding{Kind: LAPRace, Remediation: remedyLAP, Last: dl,
		Evidence:    []Evidence{evd(x.lapRecv, "LAP received")},
		Explanation: fmt.Sprintf("a LAP was received and not answered with an APR within %v: the cm_id stays in LAP_RCVD and a later ib_cm_notify(PATH_MIG) fails with EINVAL (rdma_cm drops IB_CM_LAP_RECEIVED)", m.cfg.LAPDeadline)})
	return 0
}

func (m *Model) notifyRefused(q *qp, ep *episode, ev *event.Event) {
	f := Finding{Kind: LAPRace, Errno: 22, Remediation: remedyLAP,
		Evidence: []Evidence{evd(refOf(ev), "ib_cm_notify(PATH_MIG) = -EINVAL")}}
	expl := "ib_cm_notify(PATH_MIG) returned EINVAL: the cm_id is not ESTABLISHED or a LAP is in flight (lap_state not IDLE), so the CM keeps the dead path"
	if x := q.x; x != nil && x.lapRecv.ok() {
		f.Evidence = append([]Evidence{evd(x.lapRecv, "LAP received, unanswered")}, f.Evidence...)
		expl = "ib_cm_notify(PATH_MIG) returned EINVAL because a received LAP was never answered (cm_id in LAP_RCVD), so the CM keeps the dead path"
	}
	if ep != nil {
		if ep.done&dLapNotify != 0 {
			return
		}
		ep.done |= dLapNotify
		f.Evidence = append([]Evidence{evd(ep.mig, migWhat(ep))}, f.Evidence...)
	}
	f.Explanation = expl
	m.emit(q, f)
}
