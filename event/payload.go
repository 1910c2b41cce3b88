package event

import "time"

import "fmt"

// Path is an address vector as ib_modify_qp receives it (primary with
// IB_QP_AV, alternate with IB_QP_ALT_PATH).
type Path struct {
	Port      uint32
	DLID      uint16
	SGIDIndex uint8
	DGID      [16]byte
	IsGlobal  bool
	// SrcPathBits are the address vector's source path bits: on
	// InfiniBand the packets' SLID is the port's LID ORed with them, so
	// with an LMC two paths to one DLID differ by them (the responses
	// come back another way).
	SrcPathBits uint8
	PKeyIndex   uint16 // alternate only (alt_pkey_index)
	Timeout     uint8  // alternate only (alt_timeout)
}

// SameRoute reports whether two paths lead the same way (port, DLID,
// source path bits and, for global routes, DGID). Used to spot an
// alternate equal to the primary.
func (p Path) SameRoute(o Path) bool {
	if p.Port != o.Port || p.DLID != o.DLID || p.SrcPathBits != o.SrcPathBits || p.IsGlobal != o.IsGlobal {
		return false
	}
	return !p.IsGlobal || p.DGID == o.DGID
}

// Modify is one ib_modify_qp or ib_modify_qp_with_udata call, entry and exit
// joined in the kernel.
type Modify struct {
	QPType     QPType
	Origin     Origin
	UHandle    uint32 // uverbs object id of a user QP (the handle verbs commands use)
	UserHandle uint64 // the owner's struct ibv_qp pointer, for user QPs
	AttrMask   uint32
	State      QPState  // target state, valid when AttrMask has AttrState
	MigState   MigState // valid when AttrMask has AttrPathMigState
	DestQPN    uint32   // valid when AttrMask has AttrDestQPN
	Primary    *Path    // set when AttrMask has AttrAV
	Alt        *Path    // set when AttrMask has AttrAltPath
	Ret        int32    // 0 or -errno
	Hook       string   // which function: "ib_modify_qp" or "ib_modify_qp_with_udata"
	// Took is how long the call ran, entry to return, when the record is
	// stamped at its entry (0: unknown, or under a microsecond): the
	// return is at Boot+Took. A firmware command can take up to a minute.
	Took time.Duration
	// AltAHPort is set for a modify ib_uverbs refused before the verbs
	// layer (Hook ib_uverbs_modify_qp, ib_uverbs_ex_modify_qp) that names
	// an alternate: the port of the alternate's address vector
	// (alt_ah_attr.port_num), which ib_uverbs requires to equal the
	// alternate port (Alt.Port). 0 otherwise.
	AltAHPort uint32
}

// RefusedByUverbs reports whether ib_uverbs refused the modify before the
// verbs layer (the record comes from its command hooks).
func (m *Modify) RefusedByUverbs() bool {
	return m.Hook == "ib_uverbs_modify_qp" || m.Hook == "ib_uverbs_ex_modify_qp"
}

// Has reports whether every bit of mask is in the attribute mask.
func (m *Modify) Has(mask uint32) bool { return m.AttrMask&mask == mask }

// QPEvent is an affiliated async event delivered for a QP.
type QPEvent struct {
	Type   EventType
	QPType QPType
	Origin Origin
	Hook   string // which hook saw it (for example "__ib_qp_event_handler")
}

// Untyped reports whether the event is a driver's copy: the driver hooks
// (mlx5_ib_qp_event, mlx4_ib_qp_event) see only the QPN and the raw event
// number, not the device name nor the QP type. The consumer resolves the QP
// from its history.
func (q *QPEvent) Untyped(ev *Event) bool {
	return ev.Device == "" || (q.QPType == QPTypeSMI && q.Origin == OriginUnknown)
}

// PortEvent is a port or device event.
type PortEvent struct {
	Type EventType
	Port uint32
}

// CMNotify is one ib_cm_notify(cm_id, event) call and its result.
type CMNotify struct {
	Type     EventType
	Ret      int32
	CMID     uint64 // kernel address of the ib_cm_id, as an opaque identity
	LocalID  uint32 // local communication id
	RemoteID uint32 // remote communication id
	CMState  uint8  // cm_id state at the call (enum ib_cm_state)
	LapState uint8  // cm_id lap_state at the call (enum ib_cm_lap_state)
}

// CMHandler is one cm_lap_handler or cm_apr_handler call and its result.
type CMHandler struct {
	AttrID   uint16 // CMAttrLAP or CMAttrAPR
	Ret      int32
	LocalID  uint32 // comm ids from the MAD where readable
	RemoteID uint32
	AltDLID  uint16 // alternate remote port LID carried by a LAP, where readable
	Status   uint8  // APR status, where readable
}

// MADDir is the direction of a MAD.
type MADDir uint8

const (
	MADSend MADDir = 1
	MADRecv MADDir = 2
)

func (d MADDir) String() string {
	switch d {
	case MADSend:
		return "send"
	case MADRecv:
		return "recv"
	}
	return "unknown"
}

// MAD is one CM-class management datagram seen on the wire.
type MAD struct {
	Dir       MADDir
	MgmtClass uint8
	Method    uint8
	AttrID    uint16
	TID       uint64
	SLID      uint16
	DLID      uint16
	Port      uint32
	MADQPN    uint32 // the QP the MAD travelled on (1 for GSI)
	FromUser  bool   // sent by a userspace program through ib_umad
	LocalID   uint32 // CM local comm id from the payload, where readable
	RemoteID  uint32
}

// QPLife is a QP create or destroy.
type QPLife struct {
	QPType QPType
	Origin Origin
	Ret    int32
}

// TruthOp says what a ground-truth reading reports.
type TruthOp uint8

const (
	TruthRead TruthOp = 1 // the QP's row in the kernel's resource table
	TruthGone TruthOp = 2 // the QP vanished from the table with no destroy seen
)

func (o TruthOp) String() string {
	switch o {
	case TruthRead:
		return "read"
	case TruthGone:
		return "gone"
	}
	return fmt.Sprintf("truth(%d)", uint8(o))
}

// Truth is a ground-truth reading of one QP (KindTruth): what the kernel
// answered to a query at the event's Boot time, not what a probe saw
// happen. The event's PID and Comm are the QP's owner as the kernel names
// it (a user process; for a kernel QP, PID 0 and the ULP's name).
type Truth struct {
	Op       TruthOp
	Source   string // who answered: "netlink" (rdma netlink RES_QP_GET)
	QPType   QPType
	Origin   Origin
	State    QPState
	HasState bool // State is valid
	Mig      MigState
	RQPN     uint32 // remote QPN, 0 when the kernel does not say
	CM       bool   // an rdma_cm id is bound to the QP: the CM drives it
	// Span is how long the reading took: the row reflects the QP at some
	// instant in [Boot-Span, Boot]. A dump queries one QP after another, so
	// a source stamps the readings at the dump's end and says how long it
	// ran; 0 means an instant reading at Boot.
	Span uint64
}
