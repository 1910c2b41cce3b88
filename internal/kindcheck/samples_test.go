package kindcheck

import (
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// A sample is one event of a kind and what each consumer makes of it.
type sample struct {
	ev *event.Event
	// json are fields the JSON line carries besides the common ones;
	// notJSON fields it must not carry.
	json, notJSON []string
	// detail is a text the table's WHAT column shows for it.
	detail string
	// connChange: a connected RC QP's fleet record changes (its end is
	// published again) when the event comes; connEither: it may or may
	// not, fleet's own tests say which.
	connChange, connEither bool
}

const (
	dev = "ibsim0"
	qpn = 17
)

var (
	boot0 = uint64(2 * time.Second) // the samples' stamp
	off   = 1_790_000_000 * time.Second
	alt   = event.Path{Port: 2, DLID: 4, SGIDIndex: 0, PKeyIndex: 0, Timeout: 14}
)

// ev is an event of kind k on the sample QP (qpn 0: about no QP).
func ev(k event.Kind, qpn uint32) *event.Event {
	return &event.Event{Seq: 5, Kind: k, Boot: boot0, Time: time.Unix(0, int64(boot0)).Add(off), CPU: 1,
		PID: 700, TID: 701, Comm: "lab-ibpair", Device: dev, QPN: qpn}
}

// samples has one entry per kind of event.Kinds.
func samples() map[event.Kind]sample {
	rearm := func() *event.Modify {
		return &event.Modify{QPType: event.QPTypeRC, Origin: event.OriginUser, UHandle: 2, UserHandle: 0x55d0c0a0,
			AttrMask: event.AttrAltPath | event.AttrPathMigState, MigState: event.MigRearm, Hook: "ib_modify_qp_with_udata"}
	}
	modify := ev(event.KindModify, qpn)
	modify.Modify = rearm()
	a := alt
	modify.Modify.Alt = &a

	entry := ev(event.KindModifyEntry, qpn)
	entry.Modify = rearm()

	qpEvent := ev(event.KindQPEvent, qpn)
	qpEvent.QP = &event.QPEvent{Type: event.EvPathMig, QPType: event.QPTypeRC, Origin: event.OriginUser, Hook: "__ib_qp_event_handler"}

	port := ev(event.KindPortEvent, 0)
	port.Port = &event.PortEvent{Type: event.EvPortErr, Port: 1}

	notify := ev(event.KindCMNotify, qpn)
	notify.Notify = &event.CMNotify{Type: event.EvPathMig, CMID: 0xffff888001234000, LocalID: 0x1001, RemoteID: 0x2002, CMState: 10}

	handler := ev(event.KindCMHandler, 0)
	handler.Handler = &event.CMHandler{AttrID: event.CMAttrLAP, LocalID: 0x2002, RemoteID: 0x1001, AltDLID: 4}

	mad := ev(event.KindMAD, 0)
	mad.MAD = &event.MAD{Dir: event.MADRecv, MgmtClass: event.MgmtClassCM, Method: 3, AttrID: event.CMAttrLAP,
		TID: 0x1234, SLID: 2, Port: 1, MADQPN: 1, LocalID: 0x2002, RemoteID: 0x1001}

	create := ev(event.KindQPCreate, qpn)
	create.Life = &event.QPLife{QPType: event.QPTypeRC, Origin: event.OriginUser}

	destroy := ev(event.KindQPDestroy, qpn)
	destroy.Life = &event.QPLife{QPType: event.QPTypeRC, Origin: event.OriginUser}

	truth := ev(event.KindTruth, qpn)
	truth.Seq, truth.CPU, truth.TID = 0, 0, 0
	truth.Truth = &event.Truth{Op: event.TruthRead, Source: "netlink", QPType: event.QPTypeRC, Origin: event.OriginUser,
		State: event.StateRTS, HasState: true, Mig: event.MigArmed, RQPN: 18, CM: true, Span: 1000}

	return map[event.Kind]sample{
		event.KindModify: {ev: modify, json: []string{"hook", "attr_mask", "attrs", "mig_state", "alt", "ret"},
			detail: "mig=REARM", connChange: true},
		event.KindModifyEntry: {ev: entry, json: []string{"hook", "attr_mask", "attrs", "mig_state"}, notJSON: []string{"ret", "alt"},
			detail: "entered"},
		event.KindQPEvent:   {ev: qpEvent, json: []string{"event", "event_type", "qp_type", "origin", "hook"}, detail: "PATH_MIG", connChange: true},
		event.KindPortEvent: {ev: port, json: []string{"event", "event_type", "port"}, detail: "PORT_ERR port 1"},
		event.KindCMNotify: {ev: notify, json: []string{"event", "ret", "cm_id", "local_id", "remote_id", "cm_state", "lap_state"},
			detail: "state=ESTABLISHED"},
		event.KindCMHandler: {ev: handler, json: []string{"attr", "attr_id", "ret", "local_id", "remote_id", "alt_dlid", "status"},
			detail: "LAP handler"},
		event.KindMAD: {ev: mad, json: []string{"dir", "mgmt_class", "method", "attr", "mad_tid", "slid", "mad_qpn", "from_user"},
			detail: "recv LAP"},
		// A create on a published QPN starts a new end, published once it
		// connects; the old end's record is fleet/publish/tracker.go's matter.
		event.KindQPCreate:  {ev: create, json: []string{"qp_type", "origin", "ret"}, detail: "RC user", connEither: true},
		event.KindQPDestroy: {ev: destroy, json: []string{"qp_type", "origin", "ret"}, detail: "RC user", connChange: true},
		event.KindTruth: {ev: truth, json: []string{"truth", "source", "state", "mig_state", "rqpn", "cm", "span_ns"},
			detail: "mig=ARMED", connChange: true},
	}
}
