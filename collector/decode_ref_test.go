package collector

import (
	"bytes"
	"fmt"
	"time"
	"unsafe"

	"github.com/apmwatch/apmwatch/event"
)

// The decoder as it was before an event and its payload became one
// allocation and names were cached: the reference the tests compare the
// decoder with, and the "before" of BenchmarkDecodeStorm.

func (d *decoder) decodeRef(raw []byte) (*event.Event, error) {
	var r apmApmRecord
	if err := parseRecord(raw, &r); err != nil {
		return nil, err
	}
	if r.Kind == kindDevName { // a device's name: the decoder's own rule
		return d.decode(raw)
	}
	return d.eventRef(&r)
}

func cstrRef(c []int8) string {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(c))), len(c))
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func (d *decoder) eventRef(r *apmApmRecord) (*event.Event, error) {
	e := &event.Event{
		Kind:   event.Kind(r.Kind),
		Boot:   r.BootNs,
		Time:   time.Unix(0, int64(r.BootNs)).Add(d.offset),
		CPU:    r.Cpu,
		PID:    r.Pid,
		TID:    r.Tid,
		Comm:   cstrRef(r.Comm[:]),
		Device: d.device(r), // named by index, as the decoder does
		QPN:    r.Qpn,
	}
	switch e.Kind {
	case event.KindModify, event.KindModifyEntry:
		m := &event.Modify{
			QPType:     event.QPType(r.QpType),
			Origin:     origin(r.Flags),
			UHandle:    r.Uhandle,
			UserHandle: r.UserHandle,
			AttrMask:   r.AttrMask,
			State:      event.QPState(r.State),
			MigState:   event.MigState(r.MigState),
			DestQPN:    r.DestQpn,
			Ret:        r.Ret,
			Hook:       d.hookName(r.FuncIp, "ib_modify_qp"),
			Took:       time.Duration(r.TookUs) * time.Microsecond,
		}
		if r.Flags&flagHasPrimary != 0 {
			p := path(&r.Primary)
			m.Primary = &p
		}
		if r.Flags&flagHasAlt != 0 {
			p := path(&r.Alt)
			m.Alt = &p
		}
		e.Modify = m
	case event.KindQPEvent:
		q := &event.QPEvent{
			Type:   event.EventType(r.EvType),
			QPType: event.QPType(r.QpType),
			Origin: origin(r.Flags),
			Hook:   d.hookName(r.FuncIp, "qp event handler"),
		}
		if r.Flags&flagRawEvent != 0 {
			q.Type = rawEventType(r.EvType)
			q.QPType, q.Origin = 0, event.OriginUnknown
		}
		e.QP = q
	case event.KindPortEvent:
		e.Port = &event.PortEvent{Type: event.EventType(r.EvType), Port: r.Port}
	case event.KindCMNotify:
		e.Notify = &event.CMNotify{
			Type:     event.EventType(r.EvType),
			Ret:      r.Ret,
			CMID:     r.Obj,
			LocalID:  r.LocalId,
			RemoteID: r.RemoteId,
			CMState:  r.State,
			LapState: r.MigState,
		}
	case event.KindCMHandler:
		e.Handler = &event.CMHandler{
			AttrID:   r.AttrId,
			Ret:      r.Ret,
			LocalID:  r.LocalId,
			RemoteID: r.RemoteId,
			AltDLID:  r.AltDlid,
			Status:   r.Status,
		}
	case event.KindMAD:
		e.MAD = &event.MAD{
			Dir:       event.MADDir(r.Dir),
			MgmtClass: r.MgmtClass,
			Method:    r.Method,
			AttrID:    r.AttrId,
			TID:       r.Obj,
			SLID:      r.Slid,
			DLID:      r.Dlid,
			Port:      r.Port,
			MADQPN:    r.MadQpn,
			FromUser:  r.Flags&flagFromUMAD != 0,
			LocalID:   r.LocalId,
			RemoteID:  r.RemoteId,
		}
		// A MAD is not about the GSI QP's history; a REQ or REP this host
		// sends names the connection's local QP.
		if !(e.MAD.Dir == event.MADSend && e.MAD.MgmtClass == event.MgmtClassCM &&
			(e.MAD.AttrID == event.CMAttrREQ || e.MAD.AttrID == event.CMAttrREP)) {
			e.QPN = 0
		}
	case event.KindQPCreate, event.KindQPDestroy:
		e.Life = &event.QPLife{QPType: event.QPType(r.QpType), Origin: origin(r.Flags), Ret: r.Ret}
	default:
		return nil, fmt.Errorf("unknown record kind %d", r.Kind)
	}
	return e, nil
}
