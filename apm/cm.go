package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// errEINVAL is -EINVAL as the kernel returns it.
const errEINVAL = -22

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

// cmQP ties a CM event to a QP: by the QPN on the event when the source
// knows it (QPN 1 is the GSI QP the MAD travelled on, not the connection's),
// else by the local communication id learnt from an earlier event that had
// both.
func (m *Model) cmQP(ev *event.Event) (int32, *qp) {
	local := ourCommID(ev)
	dev := uint64(m.devID(ev.Device))
	if ev.QPN > 1 {
		key := dev<<32 | uint64(ev.QPN)
		slot, q := m.get(key, true)
		if q != nil && local != 0 {
			x := q.ax()
			if x.commID != local {
				if x.commID != 0 {
					delete(m.cmIDs, dev<<32|uint64(x.commID))
				}
				x.commID = local
				m.cmIDs[dev<<32|uint64(local)] = key
			}
		}
		return slot, q
	}
	if local != 0 {
		if key, ok := m.cmIDs[dev<<32|uint64(local)]; ok {
			return m.get(key, false)
		}
	}
	return -1, nil
}

// cm applies ib_cm_notify, the CM's LAP/APR handlers and CM MADs. Any of
// them tied to a QP marks it CM-managed.
func (m *Model) cm(ev *event.Event) {
	if ev.MAD != nil && ev.MAD.MgmtClass != event.MgmtClassCM {
		m.stats.Ignored++
		return
	}
	slot, q := m.cmQP(ev)
	if q == nil {
		m.stats.Unattributed++
		return
	}
	q.flags |= fCM
	var ep *episode
	if q.x != nil {
		ep = q.x.ep
	}
	switch {
	case ev.Notify != nil:
		n := ev.Notify
		switch n.Type {
		case event.EvPathMig:
			if ep != nil && !ep.notify.ok() {
				ep.notify, ep.notifyRet = refOf(ev), n.Ret
			}
			if n.Ret == errEINVAL {
				m.notifyRefused(q, ep, ev)
			}
		case event.EvCommEst:
			if ep != nil && !ep.commEst.ok() {
				ep.commEst = refOf(ev)
			}
		}
	case ev.Handler != nil:
		if ev.Handler.AttrID == event.CMAttrLAP && ev.Handler.Ret == 0 {
			m.lapReceived(slot, q, ep, refOf(ev))
		}
	case ev.MAD != nil:
		switch {
		case ev.MAD.AttrID == event.CMAttrLAP && ev.MAD.Dir == event.MADRecv:
			m.lapReceived(slot, q, ep, refOf(ev))
		case ev.MAD.AttrID == event.CMAttrLAP && ev.MAD.Dir == event.MADSend:
			if ep != nil && !ep.lapSent.ok() && !ep.rearm.ok() {
				ep.lapSent = refOf(ev)
				if ep.commEst.ok() {
					m.lapWindow(q, ep, ep.lapSent, "the LAP was sent")
				}
			}
		case ev.MAD.AttrID == event.CMAttrAPR && ev.MAD.Dir == event.MADSend:
			m.aprSent(q, ev)
		}
	}
}

func (m *Model) lapReceived(slot int32, q *qp, ep *episode, r ref) {
	x := q.ax()
	if x.lapRecv.ok() {
		return // the handler and the MAD tracepoint see the same LAP
	}
	x.lapRecv, x.lapStuckID = r, 0
	m.wake(slot, q, r.boot+uint64(m.cfg.LAPDeadline))
	if ep != nil && !ep.lapRecv.ok() && !ep.rearm.ok() {
		ep.lapRecv = r
		if ep.commEst.ok() {
			m.lapWindow(q, ep, r, "the LAP was received")
		}
	}
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

func (m *Model) notifyRefused(q *qp, ep *episode, ev *event.Event) {
	f := Finding{Kind: LAPRace, Severity: SevError, Errno: 22, Remediation: remedyLAP,
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
