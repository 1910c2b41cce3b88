package output

import (
	"encoding/json"
	"io"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/escape"
)

// The reflective encoder --output json used before appendEventJSON: Go
// structs with tags through encoding/json. It is the reference the
// encoder's bytes are compared with (json_equal_test.go) and the "before"
// of BenchmarkJSON.

type jsonCommon struct {
	Seq    uint64 `json:"seq"`
	Kind   string `json:"kind"`
	Time   string `json:"time"`
	BootNS uint64 `json:"boot_ns"`
	CPU    uint32 `json:"cpu"`
	PID    uint32 `json:"pid"`
	TID    uint32 `json:"tid"`
	Comm   string `json:"comm"`
	Device string `json:"device"`
	QPN    uint32 `json:"qpn"`
}

type jsonPath struct {
	Port      uint32  `json:"port"`
	DLID      uint16  `json:"dlid"`
	PathBits  uint8   `json:"src_path_bits"`
	SGIDIndex uint8   `json:"sgid_index"`
	DGID      string  `json:"dgid"`
	IsGlobal  bool    `json:"is_global"`
	PKeyIndex *uint16 `json:"pkey_index,omitempty"`
	Timeout   *uint8  `json:"timeout,omitempty"`
}

type jsonModify struct {
	jsonCommon
	Hook       string    `json:"hook"`
	QPType     string    `json:"qp_type"`
	Origin     string    `json:"origin"`
	UHandle    *uint32   `json:"uhandle,omitempty"`
	UserHandle string    `json:"user_handle,omitempty"`
	AttrMask   uint32    `json:"attr_mask"`
	Attrs      []string  `json:"attrs"`
	State      string    `json:"state,omitempty"`
	MigState   string    `json:"mig_state,omitempty"`
	DestQPN    *uint32   `json:"dest_qpn,omitempty"`
	Primary    *jsonPath `json:"primary,omitempty"`
	Alt        *jsonPath `json:"alt,omitempty"`
	AltAHPort  *uint32   `json:"alt_ah_port,omitempty"`
	TookNS     int64     `json:"took_ns,omitempty"`
	Ret        *int32    `json:"ret,omitempty"` // none for a call in progress (modify-entry)
	Errno      string    `json:"errno,omitempty"`
}

type jsonQPEvent struct {
	jsonCommon
	Event  string `json:"event"`
	Type   uint8  `json:"event_type"`
	QPType string `json:"qp_type,omitempty"`
	Origin string `json:"origin"`
	Hook   string `json:"hook"`
}

type jsonPortEvent struct {
	jsonCommon
	Event string `json:"event"`
	Type  uint8  `json:"event_type"`
	Port  uint32 `json:"port"`
}

type jsonNotify struct {
	jsonCommon
	Event    string `json:"event"`
	Type     uint8  `json:"event_type"`
	Ret      int32  `json:"ret"`
	Errno    string `json:"errno,omitempty"`
	CMID     string `json:"cm_id"`
	LocalID  uint32 `json:"local_id"`
	RemoteID uint32 `json:"remote_id"`
	CMState  string `json:"cm_state"`
	LapState string `json:"lap_state"`
}

type jsonHandler struct {
	jsonCommon
	Attr     string `json:"attr"`
	AttrID   uint16 `json:"attr_id"`
	Ret      int32  `json:"ret"`
	Errno    string `json:"errno,omitempty"`
	LocalID  uint32 `json:"local_id"`
	RemoteID uint32 `json:"remote_id"`
	AltDLID  uint16 `json:"alt_dlid"`
	Status   uint8  `json:"status"`
}

type jsonMAD struct {
	jsonCommon
	Dir       string `json:"dir"`
	MgmtClass uint8  `json:"mgmt_class"`
	Method    uint8  `json:"method"`
	Attr      string `json:"attr"`
	AttrID    uint16 `json:"attr_id"`
	TID       string `json:"mad_tid"`
	SLID      uint16 `json:"slid"`
	DLID      uint16 `json:"dlid"`
	Port      uint32 `json:"port"`
	MADQPN    uint32 `json:"mad_qpn"`
	FromUser  bool   `json:"from_user"`
	LocalID   uint32 `json:"local_id"`
	RemoteID  uint32 `json:"remote_id"`
}

type jsonLife struct {
	jsonCommon
	QPType string `json:"qp_type"`
	Origin string `json:"origin"`
	Ret    int32  `json:"ret"`
	Errno  string `json:"errno,omitempty"`
}

type jsonTruth struct {
	jsonCommon
	Truth    string `json:"truth"` // read or gone
	Source   string `json:"source"`
	QPType   string `json:"qp_type,omitempty"`
	Origin   string `json:"origin,omitempty"`
	State    string `json:"state,omitempty"`
	MigState string `json:"mig_state,omitempty"`
	RQPN     uint32 `json:"rqpn,omitempty"`
	CM       bool   `json:"cm,omitempty"`
	SpanNS   uint64 `json:"span_ns,omitempty"` // the dump ran this long before boot_ns
}

func common(e *event.Event) jsonCommon {
	return jsonCommon{
		Seq: e.Seq, Kind: e.Kind.String(), Time: e.Time.UTC().Format(time.RFC3339Nano),
		BootNS: e.Boot, CPU: e.CPU, PID: e.PID, TID: e.TID, Comm: escape.Text(e.Comm), Device: escape.Text(e.Device), QPN: e.QPN,
	}
}

func pathJSON(p *event.Path, alt bool) *jsonPath {
	if p == nil {
		return nil
	}
	j := &jsonPath{Port: p.Port, DLID: p.DLID, PathBits: p.SrcPathBits, SGIDIndex: p.SGIDIndex, DGID: GID(p.DGID), IsGlobal: p.IsGlobal}
	if alt {
		pk, to := p.PKeyIndex, p.Timeout
		j.PKeyIndex, j.Timeout = &pk, &to
	}
	return j
}

// jsonValue is the JSON form of one event (one line of --output json).
func jsonValue(e *event.Event) any {
	c := common(e)
	switch {
	case e.Modify != nil:
		m := e.Modify
		j := jsonModify{jsonCommon: c, Hook: escape.Text(m.Hook), QPType: m.QPType.String(), Origin: m.Origin.String(),
			AttrMask: m.AttrMask, Attrs: AttrNames(m.AttrMask),
			Primary: pathJSON(m.Primary, false), Alt: pathJSON(m.Alt, true)}
		if m.Alt != nil && m.RefusedByUverbs() {
			p := m.AltAHPort
			j.AltAHPort = &p
		}
		if e.Kind != event.KindModifyEntry {
			ret := m.Ret
			j.Ret, j.Errno = &ret, Errno(m.Ret)
			j.TookNS = max(int64(m.Took), 0)
		}
		if m.Origin == event.OriginUser {
			h := m.UHandle
			j.UHandle, j.UserHandle = &h, hex64(m.UserHandle)
		}
		if m.Has(event.AttrState) {
			j.State = m.State.String()
		}
		if m.Has(event.AttrPathMigState) {
			j.MigState = m.MigState.String()
		}
		if m.Has(event.AttrDestQPN) {
			d := m.DestQPN
			j.DestQPN = &d
		}
		return j
	case e.QP != nil:
		j := jsonQPEvent{jsonCommon: c, Event: e.QP.Type.String(), Type: uint8(e.QP.Type),
			Origin: e.QP.Origin.String(), Hook: escape.Text(e.QP.Hook)}
		if e.QP.Origin != event.OriginUnknown {
			j.QPType = e.QP.QPType.String()
		}
		return j
	case e.Port != nil:
		return jsonPortEvent{jsonCommon: c, Event: e.Port.Type.String(), Type: uint8(e.Port.Type), Port: e.Port.Port}
	case e.Notify != nil:
		n := e.Notify
		return jsonNotify{jsonCommon: c, Event: n.Type.String(), Type: uint8(n.Type), Ret: n.Ret, Errno: Errno(n.Ret),
			CMID: hex64(n.CMID), LocalID: n.LocalID, RemoteID: n.RemoteID,
			CMState: CMState(n.CMState), LapState: LapState(n.LapState)}
	case e.Handler != nil:
		h := e.Handler
		return jsonHandler{jsonCommon: c, Attr: event.CMAttrName(h.AttrID), AttrID: h.AttrID, Ret: h.Ret,
			Errno: Errno(h.Ret), LocalID: h.LocalID, RemoteID: h.RemoteID, AltDLID: h.AltDLID, Status: h.Status}
	case e.MAD != nil:
		m := e.MAD
		return jsonMAD{jsonCommon: c, Dir: m.Dir.String(), MgmtClass: m.MgmtClass, Method: m.Method,
			Attr: madAttr(m), AttrID: m.AttrID, TID: hex64(m.TID), SLID: m.SLID, DLID: m.DLID, Port: m.Port,
			MADQPN: m.MADQPN, FromUser: m.FromUser, LocalID: m.LocalID, RemoteID: m.RemoteID}
	case e.Life != nil:
		return jsonLife{jsonCommon: c, QPType: e.Life.QPType.String(), Origin: e.Life.Origin.String(),
			Ret: e.Life.Ret, Errno: Errno(e.Life.Ret)}
	case e.Truth != nil:
		t := e.Truth
		j := jsonTruth{jsonCommon: c, Truth: t.Op.String(), Source: escape.Text(t.Source)}
		if t.Op == event.TruthRead {
			j.QPType, j.Origin, j.MigState, j.RQPN, j.CM, j.SpanNS = t.QPType.String(), t.Origin.String(), t.Mig.String(), t.RQPN, t.CM, t.Span
			if t.HasState {
				j.State = t.State.String()
			}
		}
		return j
	}
	return c
}

// refWriter writes jsonValue(e) through encoding/json, one line each.
type refWriter struct{ enc *json.Encoder }

func newRefWriter(w io.Writer) *refWriter { return &refWriter{enc: json.NewEncoder(w)} }

func (r *refWriter) Write(e *event.Event) error { return r.enc.Encode(jsonValue(e)) }
