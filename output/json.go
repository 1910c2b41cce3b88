package output

import (
	"encoding/json"
	"io"
	"net/netip"
	"strconv"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/escape"
)

// The JSON schema (docs/events.md): common fields, then the fields of the
// event's kind at the same level. Conditional fields are omitted when the
// kernel did not carry them. Strings from the host (comm, device, hook,
// source) are escaped (internal/escape): valid UTF-8 whatever the kernel
// or a recording held, and escape.Unescape gives back the original bytes.
//
// An event's line is appended field by field, in the schema's order, with
// no reflection: the bytes are those encoding/json gave for the structs
// this encoder replaced (json_equal_test.go compares them).

// appendEventJSON appends e as one JSON object and a newline; tc keeps
// the text of the last second written.
func appendEventJSON(b []byte, e *event.Event, tc *timeCache) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"kind":`...)
	b = append(b, '"')
	b = append(b, e.Kind.String()...) // a name: nothing to escape
	b = append(b, `","time":"`...)
	b = tc.append(b, e.Time) // digits and -:.TZ only
	b = append(b, `","boot_ns":`...)
	b = strconv.AppendUint(b, e.Boot, 10)
	b = appendUintField(b, `,"cpu":`, e.CPU)
	b = appendUintField(b, `,"pid":`, e.PID)
	b = appendUintField(b, `,"tid":`, e.TID)
	b = appendStringField(b, `,"comm":`, escape.Text(e.Comm))
	b = appendStringField(b, `,"device":`, escape.Text(e.Device))
	b = appendUintField(b, `,"qpn":`, e.QPN)
	switch {
	case e.Modify != nil:
		b = appendModifyJSON(b, e.Modify, e.Kind == event.KindModifyEntry)
	case e.QP != nil:
		q := e.QP
		b = appendNameField(b, `,"event":`, q.Type.String())
		b = appendUintField(b, `,"event_type":`, uint8(q.Type))
		if q.Origin != event.OriginUnknown {
			b = appendNameField(b, `,"qp_type":`, q.QPType.String())
		}
		b = appendNameField(b, `,"origin":`, q.Origin.String())
		b = appendStringField(b, `,"hook":`, escape.Text(q.Hook))
	case e.Port != nil:
		b = appendNameField(b, `,"event":`, e.Port.Type.String())
		b = appendUintField(b, `,"event_type":`, uint8(e.Port.Type))
		b = appendUintField(b, `,"port":`, e.Port.Port)
	case e.Notify != nil:
		n := e.Notify
		b = appendNameField(b, `,"event":`, n.Type.String())
		b = appendUintField(b, `,"event_type":`, uint8(n.Type))
		b = appendRet(b, n.Ret)
		b = appendHexField(b, `,"cm_id":`, n.CMID)
		b = appendUintField(b, `,"local_id":`, n.LocalID)
		b = appendUintField(b, `,"remote_id":`, n.RemoteID)
		b = appendNameField(b, `,"cm_state":`, CMState(n.CMState))
		b = appendNameField(b, `,"lap_state":`, LapState(n.LapState))
	case e.Handler != nil:
		h := e.Handler
		b = appendNameField(b, `,"attr":`, event.CMAttrName(h.AttrID))
		b = appendUintField(b, `,"attr_id":`, h.AttrID)
		b = appendRet(b, h.Ret)
		b = appendUintField(b, `,"local_id":`, h.LocalID)
		b = appendUintField(b, `,"remote_id":`, h.RemoteID)
		b = appendUintField(b, `,"alt_dlid":`, h.AltDLID)
		b = appendUintField(b, `,"status":`, h.Status)
	case e.MAD != nil:
		m := e.MAD
		b = appendNameField(b, `,"dir":`, m.Dir.String())
		b = appendUintField(b, `,"mgmt_class":`, m.MgmtClass)
		b = appendUintField(b, `,"method":`, m.Method)
		b = appendNameField(b, `,"attr":`, madAttr(m))
		b = appendUintField(b, `,"attr_id":`, m.AttrID)
		b = appendHexField(b, `,"mad_tid":`, m.TID)
		b = appendUintField(b, `,"slid":`, m.SLID)
		b = appendUintField(b, `,"dlid":`, m.DLID)
		b = appendUintField(b, `,"port":`, m.Port)
		b = appendUintField(b, `,"mad_qpn":`, m.MADQPN)
		b = appendBoolField(b, `,"from_user":`, m.FromUser)
		b = appendUintField(b, `,"local_id":`, m.LocalID)
		b = appendUintField(b, `,"remote_id":`, m.RemoteID)
	case e.Life != nil:
		b = appendNameField(b, `,"qp_type":`, e.Life.QPType.String())
		b = appendNameField(b, `,"origin":`, e.Life.Origin.String())
		b = appendRet(b, e.Life.Ret)
	case e.Truth != nil:
		b = appendTruthJSON(b, e.Truth)
	}
	return append(b, '}', '\n')
}

// appendModifyJSON writes a modify's fields; an entry (the call in
// progress) has no return code yet.
func appendModifyJSON(b []byte, m *event.Modify, entry bool) []byte {
	b = appendStringField(b, `,"hook":`, escape.Text(m.Hook))
	b = appendNameField(b, `,"qp_type":`, m.QPType.String())
	b = appendNameField(b, `,"origin":`, m.Origin.String())
	if m.Origin == event.OriginUser {
		b = appendUintField(b, `,"uhandle":`, m.UHandle)
		b = appendHexField(b, `,"user_handle":`, m.UserHandle)
	}
	b = appendUintField(b, `,"attr_mask":`, m.AttrMask)
	b = append(b, `,"attrs":`...)
	b = appendAttrNames(b, m.AttrMask)
	if m.Has(event.AttrState) {
		b = appendNameField(b, `,"state":`, m.State.String())
	}
	if m.Has(event.AttrPathMigState) {
		b = appendNameField(b, `,"mig_state":`, m.MigState.String())
	}
	if m.Has(event.AttrDestQPN) {
		b = appendUintField(b, `,"dest_qpn":`, m.DestQPN)
	}
	if m.Primary != nil {
		b = appendPathJSON(append(b, `,"primary":`...), m.Primary, false)
	}
	if m.Alt != nil {
		b = appendPathJSON(append(b, `,"alt":`...), m.Alt, true)
		if m.RefusedByUverbs() {
			b = appendUintField(b, `,"alt_ah_port":`, m.AltAHPort)
		}
	}
	if entry {
		return b
	}
	if m.Took > 0 {
		b = append(b, `,"took_ns":`...)
		b = strconv.AppendInt(b, int64(m.Took), 10)
	}
	return appendRet(b, m.Ret)
}

// appendPathJSON appends an address vector; the alternate's carries its
// P_Key index and timeout too.
func appendPathJSON(b []byte, p *event.Path, alt bool) []byte {
	b = appendUintField(b, `{"port":`, p.Port)
	b = appendUintField(b, `,"dlid":`, p.DLID)
	b = appendUintField(b, `,"src_path_bits":`, p.SrcPathBits)
	b = appendUintField(b, `,"sgid_index":`, p.SGIDIndex)
	b = append(b, `,"dgid":"`...)
	b = netip.AddrFrom16(p.DGID).AppendTo(b) // hex digits, '.' and ':' only
	b = append(b, '"')
	b = appendBoolField(b, `,"is_global":`, p.IsGlobal)
	if alt {
		b = appendUintField(b, `,"pkey_index":`, p.PKeyIndex)
		b = appendUintField(b, `,"timeout":`, p.Timeout)
	}
	return append(b, '}')
}

func appendTruthJSON(b []byte, t *event.Truth) []byte {
	b = appendNameField(b, `,"truth":`, t.Op.String())
	b = appendStringField(b, `,"source":`, escape.Text(t.Source))
	if t.Op != event.TruthRead {
		return b
	}
	b = appendNameField(b, `,"qp_type":`, t.QPType.String())
	b = appendNameField(b, `,"origin":`, t.Origin.String())
	if t.HasState {
		b = appendNameField(b, `,"state":`, t.State.String())
	}
	b = appendNameField(b, `,"mig_state":`, t.Mig.String())
	if t.RQPN != 0 {
		b = appendUintField(b, `,"rqpn":`, t.RQPN)
	}
	if t.CM {
		b = append(b, `,"cm":true`...)
	}
	if t.Span != 0 {
		b = append(b, `,"span_ns":`...)
		b = strconv.AppendUint(b, t.Span, 10)
	}
	return b
}

// appendAttrNames appends AttrNames(mask) as a JSON array.
func appendAttrNames(b []byte, mask uint32) []byte {
	b = append(b, '[')
	first := true
	sep := func() {
		if !first {
			b = append(b, ',')
		}
		first = false
	}
	for _, a := range attrNames {
		if mask&a.bit != 0 {
			sep()
			b = append(b, '"')
			b = append(b, a.name...)
			b = append(b, '"')
			mask &^= a.bit
		}
	}
	for bit := 0; mask != 0; bit++ {
		if mask&(1<<bit) != 0 {
			sep()
			b = append(b, `"BIT`...)
			b = strconv.AppendInt(b, int64(bit), 10)
			b = append(b, '"')
			mask &^= 1 << bit
		}
	}
	return append(b, ']')
}

// appendRet appends "ret" and, for a known negative errno, "errno".
func appendRet(b []byte, ret int32) []byte {
	b = append(b, `,"ret":`...)
	b = strconv.AppendInt(b, int64(ret), 10)
	if n := Errno(ret); n != "" {
		b = appendNameField(b, `,"errno":`, n)
	}
	return b
}

func appendUintField[T uint8 | uint16 | uint32](b []byte, key string, v T) []byte {
	b = append(b, key...)
	return strconv.AppendUint(b, uint64(v), 10)
}

func appendStringField(b []byte, key, s string) []byte {
	return appendJSONString(append(b, key...), s)
}

// appendNameField appends one of the product's own names: an enum's
// String, an errno name, a CM state, whose bytes (letters, digits, _ -
// ( )) JSON carries as they are. TestNamesNeedNoEscape checks every one.
func appendNameField(b []byte, key, name string) []byte {
	b = append(b, key...)
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"')
}

// appendHexField appends v as a "0x..." string (hex64).
func appendHexField(b []byte, key string, v uint64) []byte {
	b = append(b, key...)
	b = append(b, `"0x`...)
	b = strconv.AppendUint(b, v, 16)
	return append(b, '"')
}

func appendBoolField(b []byte, key string, v bool) []byte {
	b = append(b, key...)
	return strconv.AppendBool(b, v)
}

// timeCache formats wall-clock times as time.RFC3339Nano in UTC, keeping
// the text up to the seconds of the last second it formatted: events come
// many to a second.
type timeCache struct {
	sec    int64
	prefix []byte // "2006-01-02T15:04:05" of sec; nil: none yet
}

func (c *timeCache) append(b []byte, t time.Time) []byte {
	sec := t.Unix()
	if c.prefix == nil || sec != c.sec {
		full := time.Unix(sec, 0).UTC().AppendFormat(c.prefix[:0], time.RFC3339Nano)
		c.prefix, c.sec = full[:len(full)-1], sec // without its "Z"
	}
	b = append(b, c.prefix...)
	if ns := t.Nanosecond(); ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i > 0; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, 'Z')
}

// JSONWriter writes one JSON object per line.
type JSONWriter struct {
	w     io.Writer
	buf   []byte
	times timeCache
	enc   *json.Encoder // findings
	host  string        // the findings' host (SetHost)
}

// NewJSONWriter writes to w.
func NewJSONWriter(w io.Writer) *JSONWriter { return &JSONWriter{w: w, enc: json.NewEncoder(w)} }

// Write writes e as one line, in one call to the underlying writer (trace
// buffers it: output.Buffered).
func (j *JSONWriter) Write(e *event.Event) error {
	j.buf = appendEventJSON(j.buf[:0], e, &j.times)
	_, err := j.w.Write(j.buf)
	if cap(j.buf) > 64<<10 { // a line with long host strings: do not keep its buffer
		j.buf = nil
	}
	return err
}

// Close has nothing to flush.
func (j *JSONWriter) Close() error { return nil }

func madAttr(m *event.MAD) string {
	if m.MgmtClass == event.MgmtClassCM {
		return event.CMAttrName(m.AttrID)
	}
	return hex64(uint64(m.AttrID))
}
