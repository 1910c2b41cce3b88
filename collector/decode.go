package collector

import (
	"bytes"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/apmwatch/apmwatch/event"
)

// recordSize is the size of struct apm_record, sent whole only for a
// device's name; a record with paths ends before the name (pathsSize,
// APM_RECORD_PATHS in bpf/apmwatch.h), one without paths before them
// (shortSize, APM_RECORD_SHORT).
const (
	recordSize = int(unsafe.Sizeof(apmApmRecord{}))
	pathsSize  = int(unsafe.Offsetof(apmApmRecord{}.Dev))
	shortSize  = int(unsafe.Offsetof(apmApmRecord{}.Primary))
)

// Flags of struct apm_record: enum apm_flag in bpf/apmwatch.h, through
// bpf2go.
const (
	flagHasPrimary = uint8(apmApmFlagAPM_F_HAS_PRIMARY)
	flagHasAlt     = uint8(apmApmFlagAPM_F_HAS_ALT)
	flagUser       = uint8(apmApmFlagAPM_F_USER)
	flagKernel     = uint8(apmApmFlagAPM_F_KERNEL)
	flagFromUMAD   = uint8(apmApmFlagAPM_F_FROM_UMAD)
	flagRawEvent   = uint8(apmApmFlagAPM_F_RAW_EVENT)
	flagMlx4       = uint8(apmApmFlagAPM_F_MLX4)
	flagDev        = uint8(apmApmFlagAPM_F_DEV)
)

// kindDevName is a device's index and name: read, never an event.
const kindDevName = uint8(apmApmKindAPM_KIND_DEV_NAME)

var errShortRecord = errors.New("short record")

// decoder turns raw ring buffer records into events.
type decoder struct {
	offset time.Duration     // wall clock minus CLOCK_BOOTTIME
	names  map[uint64]string // function address -> hook name
	strs   strCache          // process names
	devs   *devNames         // device index -> name
}

// parseRecord copies a raw sample into the generated record type (zeroed
// by the caller): a short record, one with paths, or a device's name.
func parseRecord(raw []byte, rec *apmApmRecord) error {
	if len(raw) < shortSize {
		return fmt.Errorf("%w: %d bytes, want %d or more", errShortRecord, len(raw), shortSize)
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(rec)), recordSize), raw)
	switch {
	case rec.Kind == kindDevName && len(raw) < recordSize:
		return fmt.Errorf("%w: %d bytes for a device name, want %d", errShortRecord, len(raw), recordSize)
	case rec.Flags&(flagHasPrimary|flagHasAlt) != 0 && len(raw) < pathsSize:
		return fmt.Errorf("%w: %d bytes with paths, want %d", errShortRecord, len(raw), pathsSize)
	}
	return nil
}

// decode returns the event of a raw record, or nil for a device's name
// (which it keeps for the records that follow).
func (d *decoder) decode(raw []byte) (*event.Event, error) {
	var r apmApmRecord
	if err := parseRecord(raw, &r); err != nil {
		return nil, err
	}
	if r.Kind == kindDevName {
		if r.Flags&flagDev == 0 {
			return nil, errors.New("device name without an index")
		}
		d.devs.set(r.DevIndex, string(cbytes(r.Dev[:])))
		return nil, nil
	}
	return d.event(&r)
}

// device names the record's device ("" when it has none, or it is unknown).
func (d *decoder) device(r *apmApmRecord) string {
	if r.Flags&flagDev == 0 || d.devs == nil {
		return ""
	}
	return d.devs.name(r.DevIndex)
}

// cbytes is a NUL-terminated C char array's text, not copied.
func cbytes(c []int8) []byte {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(c))), len(c))
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return b
}

func origin(flags uint8) event.Origin {
	switch {
	case flags&flagUser != 0:
		return event.OriginUser
	case flags&flagKernel != 0:
		return event.OriginKernel
	}
	return event.OriginUnknown
}

// hookName resolves the function address a probe saw.
func (d *decoder) hookName(ip uint64, fallback string) string {
	if ip == 0 {
		return fallback
	}
	if n, ok := d.names[ip]; ok {
		return n
	}
	// With IBT a kprobe may report the address after the endbr64.
	if n, ok := d.names[ip-4]; ok {
		return n
	}
	return fallback
}

// An event and its payload are one allocation: the payload types below
// hold both (and a modify's paths), so a record costs one allocation
// whatever its kind.
type (
	withModify struct {
		e     event.Event
		m     event.Modify
		paths [2]event.Path
	}
	withQP struct {
		e event.Event
		q event.QPEvent
	}
	withPort struct {
		e event.Event
		p event.PortEvent
	}
	withNotify struct {
		e event.Event
		n event.CMNotify
	}
	withHandler struct {
		e event.Event
		h event.CMHandler
	}
	withMAD struct {
		e event.Event
		m event.MAD
	}
	withLife struct {
		e event.Event
		l event.QPLife
	}
)

// header fills the fields every kind has.
func (d *decoder) header(e *event.Event, r *apmApmRecord) {
	e.Kind = event.Kind(r.Kind)
	e.Boot = r.BootNs
	e.Time = time.Unix(0, int64(r.BootNs)).Add(d.offset)
	e.CPU, e.PID, e.TID = r.Cpu, r.Pid, r.Tid
	e.Comm = d.strs.get(cbytes(r.Comm[:]))
	e.Device = d.device(r)
	e.QPN = r.Qpn
}

func (d *decoder) event(r *apmApmRecord) (*event.Event, error) {
	var e *event.Event
	switch event.Kind(r.Kind) {
	case event.KindModify, event.KindModifyEntry:
		w := new(withModify)
		e = &w.e
		w.m = event.Modify{
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
		if w.m.RefusedByUverbs() && r.Flags&flagHasAlt != 0 {
			w.m.AltAHPort = r.Port
		}
		if r.Flags&flagHasPrimary != 0 {
			w.paths[0] = path(&r.Primary)
			w.m.Primary = &w.paths[0]
		}
		if r.Flags&flagHasAlt != 0 {
			w.paths[1] = path(&r.Alt)
			w.m.Alt = &w.paths[1]
		}
		e.Modify = &w.m
	case event.KindQPEvent:
		w := new(withQP)
		e = &w.e
		w.q = event.QPEvent{
			Type:   event.EventType(r.EvType),
			QPType: event.QPType(r.QpType),
			Origin: origin(r.Flags),
			Hook:   d.hookName(r.FuncIp, "qp event handler"),
		}
		if r.Flags&flagRawEvent != 0 {
			w.q.Type = rawEventType(r.EvType)
			w.q.QPType, w.q.Origin = 0, event.OriginUnknown
		}
		e.QP = &w.q
	case event.KindPortEvent:
		w := new(withPort)
		e = &w.e
		w.p = event.PortEvent{Type: event.EventType(r.EvType), Port: r.Port}
		e.Port = &w.p
	case event.KindCMNotify:
		w := new(withNotify)
		e = &w.e
		w.n = event.CMNotify{
			Type:     event.EventType(r.EvType),
			Ret:      r.Ret,
			CMID:     r.Obj,
			LocalID:  r.LocalId,
			RemoteID: r.RemoteId,
			CMState:  r.State,
			LapState: r.MigState,
		}
		e.Notify = &w.n
	case event.KindCMHandler:
		w := new(withHandler)
		e = &w.e
		w.h = event.CMHandler{
			AttrID:   r.AttrId,
			Ret:      r.Ret,
			LocalID:  r.LocalId,
			RemoteID: r.RemoteId,
			AltDLID:  r.AltDlid,
			Status:   r.Status,
		}
		e.Handler = &w.h
	case event.KindMAD:
		w := new(withMAD)
		e = &w.e
		w.m = event.MAD{
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
		e.MAD = &w.m
	case event.KindQPCreate, event.KindQPDestroy:
		w := new(withLife)
		e = &w.e
		w.l = event.QPLife{QPType: event.QPType(r.QpType), Origin: origin(r.Flags), Ret: r.Ret}
		e.Life = &w.l
	default:
		return nil, fmt.Errorf("unknown record kind %d", r.Kind)
	}
	d.header(e, r)
	if m := e.MAD; m != nil {
		// A MAD is not about the GSI QP's history; a REQ or REP this host
		// sends names the connection's local QP.
		if !(m.Dir == event.MADSend && m.MgmtClass == event.MgmtClassCM &&
			(m.AttrID == event.CMAttrREQ || m.AttrID == event.CMAttrREP)) {
			e.QPN = 0
		}
	}
	return e, nil
}

func path(p *apmApmPath) event.Path {
	return event.Path{
		Port:        p.Port,
		DLID:        p.Dlid,
		SrcPathBits: p.SrcPathBits,
		SGIDIndex:   p.SgidIndex,
		DGID:        p.Dgid,
		IsGlobal:    p.IsGlobal != 0,
		PKeyIndex:   p.PkeyIndex,
		Timeout:     p.Timeout,
	}
}

// rawEventType maps mlx4/mlx5 EQE event numbers (identical for the QP
// events) to ib_event_type.
func rawEventType(raw uint8) event.EventType {
	switch raw {
	case 0x01:
		return event.EvPathMig
	case 0x02:
		return event.EvCommEst
	case 0x03:
		return event.EvSQDrained
	case 0x05:
		return event.EvQPFatal
	case 0x07:
		return event.EvPathMigErr
	case 0x10:
		return event.EvQPReqErr
	case 0x11:
		return event.EvQPAccessErr
	case 0x13:
		return event.EvQPLastWQEReached
	}
	return event.EventType(0x80 | raw)
}
