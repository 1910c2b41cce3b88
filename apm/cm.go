package apm

import (
	"github.com/apmwatch/apmwatch/event"
)

// The CM's side of the state machine: which QP a CM event is about, and
// what ib_cm_notify, the LAP/APR handlers and CM MADs change.

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
	case ev.MAD.AttrID == event.CMAttrAPR && ev.MAD.Dir == event.MADSend:
		m.aprSent(q, ev)
	}
}
