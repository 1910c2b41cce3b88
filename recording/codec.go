package recording

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// Event record flags: bits 0-6 say which payloads follow (in bit order, each
// prefixed with its length), bit 7 that Time is the zero time. Payload kinds
// added later take bits 8 and up and are encoded after the known ones, so an
// older reader ignores them as trailing bytes (Truth, bit 8, is the first).
const (
	hasModify uint64 = 1 << iota
	hasQP
	hasPort
	hasNotify
	hasHandler
	hasMAD
	hasLife
	timeZero
	hasTruth // bit 8: the first payload added after version 1
)

// appendEvent appends an event record. off is the recording's boot-to-wall
// offset: Time is stored as its difference from Boot+off, usually zero.
func appendEvent(b []byte, e *event.Event, off int64) []byte {
	b = append(b, recEvent)
	b, at := reserveLen(b)

	var flags uint64
	for i, p := range [...]bool{e.Modify != nil, e.QP != nil, e.Port != nil, e.Notify != nil, e.Handler != nil, e.MAD != nil, e.Life != nil} {
		if p {
			flags |= 1 << i
		}
	}
	if e.Time.IsZero() {
		flags |= timeZero
	}
	if e.Truth != nil {
		flags |= hasTruth
	}
	b = binary.AppendUvarint(b, flags)
	b = append(b, byte(e.Kind))
	b = binary.AppendUvarint(b, e.Seq)
	b = binary.AppendUvarint(b, e.Boot)
	if flags&timeZero == 0 {
		b = binary.AppendVarint(b, e.Time.UnixNano()-int64(e.Boot)-off)
	}
	b = binary.AppendUvarint(b, uint64(e.CPU))
	b = binary.AppendUvarint(b, uint64(e.PID))
	b = binary.AppendUvarint(b, uint64(e.TID))
	b = appendStr(b, e.Comm)
	b = appendStr(b, e.Device)
	b = binary.AppendUvarint(b, uint64(e.QPN))

	if m := e.Modify; m != nil {
		var pat int
		b, pat = reserveLen(b)
		b = append(b, byte(m.QPType), byte(m.Origin))
		b = binary.AppendUvarint(b, uint64(m.UHandle))
		b = binary.AppendUvarint(b, m.UserHandle)
		b = binary.AppendUvarint(b, uint64(m.AttrMask))
		b = append(b, byte(m.State), byte(m.MigState))
		b = binary.AppendUvarint(b, uint64(m.DestQPN))
		var paths byte
		if m.Primary != nil {
			paths |= 1
		}
		if m.Alt != nil {
			paths |= 2
		}
		b = append(b, paths)
		if m.Primary != nil {
			b = appendPath(b, m.Primary)
		}
		if m.Alt != nil {
			b = appendPath(b, m.Alt)
		}
		b = binary.AppendVarint(b, int64(m.Ret))
		b = appendStr(b, m.Hook)
		b = binary.AppendVarint(b, int64(m.Took)) // added later: older readers ignore it
		bits := pathBits(m.Primary) != 0 || pathBits(m.Alt) != 0
		if m.AltAHPort != 0 || bits { // added later still, and only when set (or followed): 0 when absent
			b = binary.AppendUvarint(b, uint64(m.AltAHPort))
		}
		if bits { // and the paths' source path bits, only when one is set
			b = append(b, pathBits(m.Primary), pathBits(m.Alt))
		}
		b = endLen(b, pat)
	}
	if q := e.QP; q != nil {
		var pat int
		b, pat = reserveLen(b)
		b = append(b, byte(q.Type), byte(q.QPType), byte(q.Origin))
		b = appendStr(b, q.Hook)
		b = endLen(b, pat)
	}
	if p := e.Port; p != nil {
		var pat int
		b, pat = reserveLen(b)
		b = append(b, byte(p.Type))
		b = binary.AppendUvarint(b, uint64(p.Port))
		b = endLen(b, pat)
	}
	if n := e.Notify; n != nil {
		var pat int
		b, pat = reserveLen(b)
		b = append(b, byte(n.Type))
		b = binary.AppendVarint(b, int64(n.Ret))
		b = binary.LittleEndian.AppendUint64(b, n.CMID)
		b = binary.LittleEndian.AppendUint32(b, n.LocalID)
		b = binary.LittleEndian.AppendUint32(b, n.RemoteID)
		b = append(b, n.CMState, n.LapState)
		b = endLen(b, pat)
	}
	if h := e.Handler; h != nil {
		var pat int
		b, pat = reserveLen(b)
		b = binary.AppendUvarint(b, uint64(h.AttrID))
		b = binary.AppendVarint(b, int64(h.Ret))
		b = binary.LittleEndian.AppendUint32(b, h.LocalID)
		b = binary.LittleEndian.AppendUint32(b, h.RemoteID)
		b = binary.AppendUvarint(b, uint64(h.AltDLID))
		b = append(b, h.Status)
		b = endLen(b, pat)
	}
	if m := e.MAD; m != nil {
		var pat int
		b, pat = reserveLen(b)
		b = append(b, byte(m.Dir), m.MgmtClass, m.Method)
		b = binary.AppendUvarint(b, uint64(m.AttrID))
		b = binary.LittleEndian.AppendUint64(b, m.TID)
		b = binary.AppendUvarint(b, uint64(m.SLID))
		b = binary.AppendUvarint(b, uint64(m.DLID))
		b = binary.AppendUvarint(b, uint64(m.Port))
		b = binary.AppendUvarint(b, uint64(m.MADQPN))
		b = appendBool(b, m.FromUser)
		b = binary.LittleEndian.AppendUint32(b, m.LocalID)
		b = binary.LittleEndian.AppendUint32(b, m.RemoteID)
		b = endLen(b, pat)
	}
	if l := e.Life; l != nil {
		var pat int
		b, pat = reserveLen(b)
		b = append(b, byte(l.QPType), byte(l.Origin))
		b = binary.AppendVarint(b, int64(l.Ret))
		b = endLen(b, pat)
	}
	if t := e.Truth; t != nil {
		var pat int
		b, pat = reserveLen(b)
		b = append(b, byte(t.Op))
		b = appendStr(b, t.Source)
		b = append(b, byte(t.QPType), byte(t.Origin), byte(t.State))
		b = appendBool(b, t.HasState)
		b = append(b, byte(t.Mig))
		b = binary.AppendUvarint(b, uint64(t.RQPN))
		b = appendBool(b, t.CM)
		b = binary.AppendUvarint(b, t.Span) // added later: absent in older recordings
		b = endLen(b, pat)
	}
	return endLen(b, at)
}

// Path flags: IsGlobal, and whether the 16 DGID bytes follow (they are left
// out when all zero).
const (
	pathGlobal byte = 1 << iota
	pathDGID
)

func appendPath(b []byte, p *event.Path) []byte {
	b = binary.AppendUvarint(b, uint64(p.Port))
	b = binary.AppendUvarint(b, uint64(p.DLID))
	b = append(b, p.SGIDIndex)
	var f byte
	if p.IsGlobal {
		f |= pathGlobal
	}
	if p.DGID != [16]byte{} {
		f |= pathDGID
	}
	b = append(b, f)
	if f&pathDGID != 0 {
		b = append(b, p.DGID[:]...)
	}
	b = binary.AppendUvarint(b, uint64(p.PKeyIndex))
	return append(b, p.Timeout)
}

// decodeEvent decodes an event record body. Payload parts may be longer than
// this version knows (fields added later); the extra bytes are ignored.
func decodeEvent(body []byte, off int64, in *interner) (*event.Event, error) {
	d := dec{b: body}
	e := new(event.Event)
	flags := d.uvarint()
	e.Kind = event.Kind(d.u8())
	e.Seq = d.uvarint()
	e.Boot = d.uvarint()
	if flags&timeZero == 0 {
		e.Time = time.Unix(0, d.varint()+int64(e.Boot)+off)
	}
	e.CPU = d.u32()
	e.PID = d.u32()
	e.TID = d.u32()
	e.Comm = d.str(in)
	e.Device = d.str(in)
	e.QPN = d.u32()

	if flags&hasModify != 0 {
		p := d.sub()
		m := &event.Modify{}
		m.QPType = event.QPType(p.u8())
		m.Origin = event.Origin(p.u8())
		m.UHandle = p.u32()
		m.UserHandle = p.uvarint()
		m.AttrMask = p.u32()
		m.State = event.QPState(p.u8())
		m.MigState = event.MigState(p.u8())
		m.DestQPN = p.u32()
		paths := p.u8()
		if paths&1 != 0 {
			m.Primary = decodePath(&p)
		}
		if paths&2 != 0 {
			m.Alt = decodePath(&p)
		}
		m.Ret = p.i32()
		m.Hook = p.str(in)
		if len(p.b) > 0 { // older recorders wrote no duration
			m.Took = time.Duration(p.varint())
		}
		if len(p.b) > 0 { // nor the alternate's address vector port
			m.AltAHPort = p.u32()
		}
		if len(p.b) > 0 { // nor the paths' source path bits
			setPathBits(m.Primary, p.u8())
			setPathBits(m.Alt, p.u8())
		}
		e.Modify = m
		if p.err != nil {
			return nil, fmt.Errorf("modify: %w", p.err)
		}
	}
	if flags&hasQP != 0 {
		p := d.sub()
		e.QP = &event.QPEvent{
			Type:   event.EventType(p.u8()),
			QPType: event.QPType(p.u8()),
			Origin: event.Origin(p.u8()),
			Hook:   p.str(in),
		}
		if p.err != nil {
			return nil, fmt.Errorf("qp event: %w", p.err)
		}
	}
	if flags&hasPort != 0 {
		p := d.sub()
		e.Port = &event.PortEvent{Type: event.EventType(p.u8()), Port: p.u32()}
		if p.err != nil {
			return nil, fmt.Errorf("port event: %w", p.err)
		}
	}
	if flags&hasNotify != 0 {
		p := d.sub()
		e.Notify = &event.CMNotify{
			Type:     event.EventType(p.u8()),
			Ret:      p.i32(),
			CMID:     p.u64le(),
			LocalID:  p.u32le(),
			RemoteID: p.u32le(),
			CMState:  p.u8(),
			LapState: p.u8(),
		}
		if p.err != nil {
			return nil, fmt.Errorf("cm notify: %w", p.err)
		}
	}
	if flags&hasHandler != 0 {
		p := d.sub()
		e.Handler = &event.CMHandler{
			AttrID:   p.u16(),
			Ret:      p.i32(),
			LocalID:  p.u32le(),
			RemoteID: p.u32le(),
			AltDLID:  p.u16(),
			Status:   p.u8(),
		}
		if p.err != nil {
			return nil, fmt.Errorf("cm handler: %w", p.err)
		}
	}
	if flags&hasMAD != 0 {
		p := d.sub()
		e.MAD = &event.MAD{
			Dir:       event.MADDir(p.u8()),
			MgmtClass: p.u8(),
			Method:    p.u8(),
			AttrID:    p.u16(),
			TID:       p.u64le(),
			SLID:      p.u16(),
			DLID:      p.u16(),
			Port:      p.u32(),
			MADQPN:    p.u32(),
			FromUser:  p.bool(),
			LocalID:   p.u32le(),
			RemoteID:  p.u32le(),
		}
		if p.err != nil {
			return nil, fmt.Errorf("mad: %w", p.err)
		}
	}
	if flags&hasLife != 0 {
		p := d.sub()
		e.Life = &event.QPLife{QPType: event.QPType(p.u8()), Origin: event.Origin(p.u8()), Ret: p.i32()}
		if p.err != nil {
			return nil, fmt.Errorf("qp life: %w", p.err)
		}
	}
	if flags&hasTruth != 0 {
		p := d.sub()
		e.Truth = &event.Truth{
			Op:       event.TruthOp(p.u8()),
			Source:   p.str(in),
			QPType:   event.QPType(p.u8()),
			Origin:   event.Origin(p.u8()),
			State:    event.QPState(p.u8()),
			HasState: p.bool(),
			Mig:      event.MigState(p.u8()),
			RQPN:     p.u32(),
			CM:       p.bool(),
		}
		if len(p.b) > 0 {
			e.Truth.Span = p.uvarint()
		}
		if p.err != nil {
			return nil, fmt.Errorf("qp truth: %w", p.err)
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	return e, nil
}

// pathBits is a path's source path bits, 0 for no path.
func pathBits(p *event.Path) uint8 {
	if p == nil {
		return 0
	}
	return p.SrcPathBits
}

func setPathBits(p *event.Path, v uint8) {
	if p != nil {
		p.SrcPathBits = v
	}
}

func decodePath(d *dec) *event.Path {
	p := &event.Path{Port: d.u32(), DLID: d.u16(), SGIDIndex: d.u8()}
	f := d.u8()
	p.IsGlobal = f&pathGlobal != 0
	if f&pathDGID != 0 {
		copy(p.DGID[:], d.bytes(16))
	}
	p.PKeyIndex = d.u16()
	p.Timeout = d.u8()
	return p
}

func appendStats(b []byte, s *event.Stats) []byte {
	b = append(b, recStats)
	b, at := reserveLen(b)
	b = binary.AppendUvarint(b, s.Events)
	b = binary.AppendUvarint(b, s.Lost)
	b = binary.AppendUvarint(b, s.DecodeErrs)
	b = binary.AppendUvarint(b, s.Unjoined)
	b = binary.AppendUvarint(b, uint64(len(s.LostPerCPU)))
	for _, n := range s.LostPerCPU {
		b = binary.AppendUvarint(b, n)
	}
	b = binary.AppendUvarint(b, s.At)     // appended: older readers stop before it
	b = binary.AppendUvarint(b, s.Missed) // likewise
	b = binary.AppendUvarint(b, s.MissedAt)
	return endLen(b, at)
}

func decodeStats(body []byte) (event.Stats, error) {
	d := dec{b: body}
	var s event.Stats
	s.Events = d.uvarint()
	s.Lost = d.uvarint()
	s.DecodeErrs = d.uvarint()
	s.Unjoined = d.uvarint()
	n := d.uvarint()
	if n > uint64(len(d.b)) { // each counter takes at least one byte
		return s, errShort
	}
	if n > maxCPUs {
		return s, fmt.Errorf("%d per-cpu counters, more than %d cpus", n, maxCPUs)
	}
	if n > 0 {
		s.LostPerCPU = make([]uint64, n)
		for i := range s.LostPerCPU {
			s.LostPerCPU[i] = d.uvarint()
		}
	}
	if d.err == nil && len(d.b) > 0 {
		s.At = d.uvarint()
	}
	if d.err == nil && len(d.b) > 0 {
		s.Missed = d.uvarint()
	}
	if d.err == nil && len(d.b) > 0 {
		s.MissedAt = d.uvarint()
	}
	return s, d.err
}

// The end record closes a file on purpose (Close, or a rotation) and counts
// what the file holds, so a reader can tell a clean end from a cut.
type endRecord struct {
	events, stats uint64
}

func appendEnd(b []byte, r endRecord) []byte {
	b = append(b, recEnd)
	b, at := reserveLen(b)
	b = binary.AppendUvarint(b, r.events)
	b = binary.AppendUvarint(b, r.stats)
	return endLen(b, at)
}

func decodeEnd(body []byte) (endRecord, error) {
	d := dec{b: body}
	r := endRecord{events: d.uvarint(), stats: d.uvarint()}
	return r, d.err
}
