package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// lap-race: the new alternate must be specified between the migration and
// the communication-established event on the migrated path, so that the LAP
// reaches the remote node; and in order: LAP and new alternate, then rearm.
// Four ways to lose the race, each once per episode:
//   - window: on a CM-managed QP, the LAP (sent or received) or the new
//     alternate comes after COMM_EST on the migrated path (the window exists
//     for the LAP: a QP whose ends exchange paths without the CM has none);
//   - order: the rearm came first and the alternate load follows within
//     EpisodeLinger (steps 2 and 3 swapped);
//   - notify: ib_cm_notify(PATH_MIG) returned EINVAL (a LAP in flight: the
//     CM keeps the dead path);
//   - stuck: a LAP the CM accepted is not answered with an APR within
//     LAPDeadline (the cm_id stays in LAP_RCVD; rdma_cm drops the event).
// A LAP the CM refused (cm_lap_handler returned an error) is no race.

const remedyLAP = "keep the order and the window: LAP and new alternate between PATH_MIG and COMM_EST, then rearm; answer every received LAP with an APR; " + stepsRemedy

// errEINVAL is -EINVAL as the kernel returns it.
const errEINVAL = -22

func (m *Model) lapWindow(q *qp, ep *episode, r ref, what string) {
	if ep.done&dLapWindow != 0 {
		return
	}
	ep.done |= dLapWindow
	m.emit(q, Finding{Kind: LAPRace, Remediation: remedyLAP,
		Evidence:    []Evidence{evd(ep.mig, migWhat(ep)), evd(ep.commEst, "COMM_EST on the migrated path"), evd(r, what)},
		Explanation: fmt.Sprintf("%s %v after COMM_EST on the migrated path, outside the window from the migration to COMM_EST, so the LAP cannot reach the remote node in time", what, since(ep.commEst.boot, r.boot))})
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

// lapSent notes a LAP this side sent in the episode.
func (m *Model) lapSent(q *qp, ep *episode, ev *event.Event) {
	if ep == nil || ep.lapSent.ok() || ep.rearm.ok() || ev.Boot < ep.mig.boot {
		return
	}
	ep.lapSent = refOf(ev)
	if ep.commEst.ok() {
		m.lapWindow(q, ep, ep.lapSent, "the LAP was sent")
	}
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
	if ep != nil && !ep.lapRecv.ok() && !ep.rearm.ok() && r.boot >= ep.mig.boot {
		ep.lapRecv = r
		if ep.commEst.ok() {
			m.lapWindow(q, ep, r, "the LAP was received")
		}
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
			First: x.lapRecv.boot, Last: ev.Boot, Remediation: remedyLAP,
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
