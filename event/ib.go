package event

import "fmt"

// Attribute mask bits of ib_modify_qp (kernel ib_verbs.h, rdma-core IBV_QP_*).
const (
	AttrState        uint32 = 1 << 0
	AttrCurState     uint32 = 1 << 1
	AttrAccessFlags  uint32 = 1 << 3
	AttrPKeyIndex    uint32 = 1 << 4
	AttrPort         uint32 = 1 << 5
	AttrAV           uint32 = 1 << 7
	AttrPathMTU      uint32 = 1 << 8
	AttrTimeout      uint32 = 1 << 9
	AttrRetryCnt     uint32 = 1 << 10
	AttrRNRRetry     uint32 = 1 << 11
	AttrRQPSN        uint32 = 1 << 12
	AttrAltPath      uint32 = 1 << 14
	AttrMinRNRTimer  uint32 = 1 << 15
	AttrSQPSN        uint32 = 1 << 16
	AttrPathMigState uint32 = 1 << 18
	AttrDestQPN      uint32 = 1 << 20
)

// MigState is enum ib_mig_state.
type MigState uint8

const (
	MigMigrated MigState = 0
	MigRearm    MigState = 1
	MigArmed    MigState = 2
)

func (m MigState) String() string {
	switch m {
	case MigMigrated:
		return "MIGRATED"
	case MigRearm:
		return "REARM"
	case MigArmed:
		return "ARMED"
	}
	return fmt.Sprintf("MIG(%d)", uint8(m))
}

// QPState is enum ib_qp_state.
type QPState uint8

const (
	StateReset QPState = 0
	StateInit  QPState = 1
	StateRTR   QPState = 2
	StateRTS   QPState = 3
	StateSQD   QPState = 4
	StateSQE   QPState = 5
	StateErr   QPState = 6
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("STATE(%d)", uint8(s))
}

// QPType is enum ib_qp_type (the values APM cares about).
type QPType uint8

const (
	QPTypeSMI QPType = 0
	QPTypeGSI QPType = 1
	QPTypeRC  QPType = 2
	QPTypeUC  QPType = 3
	QPTypeUD  QPType = 4

	QPTypeXRCIni QPType = 9  // XRC initiator
	QPTypeXRCTgt QPType = 10 // XRC target
)

// HasAPM reports whether a QP type has a path-migration state: RC, UC and
// the XRC initiator and target (connected transports). The special QPs,
// UD and raw packet QPs have none.
func (t QPType) HasAPM() bool {
	return t == QPTypeRC || t == QPTypeUC || t == QPTypeXRCIni || t == QPTypeXRCTgt
}

func (t QPType) String() string {
	switch t {
	case QPTypeSMI:
		return "SMI"
	case QPTypeGSI:
		return "GSI"
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	case QPTypeXRCIni:
		return "XRC_INI"
	case QPTypeXRCTgt:
		return "XRC_TGT"
	}
	return fmt.Sprintf("TYPE(%d)", uint8(t))
}

// EventType is enum ib_event_type.
type EventType uint8

const (
	EvCQErr            EventType = 0
	EvQPFatal          EventType = 1
	EvQPReqErr         EventType = 2
	EvQPAccessErr      EventType = 3
	EvCommEst          EventType = 4
	EvSQDrained        EventType = 5
	EvPathMig          EventType = 6
	EvPathMigErr       EventType = 7
	EvDeviceFatal      EventType = 8
	EvPortActive       EventType = 9
	EvPortErr          EventType = 10
	EvLIDChange        EventType = 11
	EvPKeyChange       EventType = 12
	EvSMChange         EventType = 13
	EvSRQErr           EventType = 14
	EvSRQLimitReached  EventType = 15
	EvQPLastWQEReached EventType = 16
	EvClientReregister EventType = 17
	EvGIDChange        EventType = 18
	EvWQFatal          EventType = 19
)

var eventTypeNames = [...]string{
	"CQ_ERR", "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR", "COMM_EST", "SQ_DRAINED",
	"PATH_MIG", "PATH_MIG_ERR", "DEVICE_FATAL", "PORT_ACTIVE", "PORT_ERR",
	"LID_CHANGE", "PKEY_CHANGE", "SM_CHANGE", "SRQ_ERR", "SRQ_LIMIT_REACHED",
	"QP_LAST_WQE_REACHED", "CLIENT_REREGISTER", "GID_CHANGE", "WQ_FATAL",
}

func (t EventType) String() string {
	if int(t) < len(eventTypeNames) {
		return eventTypeNames[t]
	}
	return fmt.Sprintf("EVENT(%d)", uint8(t))
}

// ParseEventType accepts a name (PATH_MIG, path_mig, path-mig) or a number.
func ParseEventType(s string) (EventType, error) {
	norm := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '-':
			c = '_'
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		}
		norm = append(norm, c)
	}
	for i, n := range eventTypeNames {
		if n == string(norm) {
			return EventType(i), nil
		}
	}
	var n uint8
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && fmt.Sprint(n) == s {
		return EventType(n), nil
	}
	return 0, fmt.Errorf("unknown ib event type %q", s)
}

// CM MAD attribute ids (management class 0x07).
const (
	MgmtClassCM uint8  = 0x07
	CMAttrREQ   uint16 = 0x10
	CMAttrMRA   uint16 = 0x11
	CMAttrREJ   uint16 = 0x12
	CMAttrREP   uint16 = 0x13
	CMAttrRTU   uint16 = 0x14
	CMAttrDREQ  uint16 = 0x15
	CMAttrDREP  uint16 = 0x16
	CMAttrSIDRQ uint16 = 0x17
	CMAttrSIDRP uint16 = 0x18
	CMAttrLAP   uint16 = 0x19
	CMAttrAPR   uint16 = 0x1A
)

// CMAttrName names a CM attribute id.
func CMAttrName(id uint16) string {
	switch id {
	case CMAttrREQ:
		return "REQ"
	case CMAttrMRA:
		return "MRA"
	case CMAttrREJ:
		return "REJ"
	case CMAttrREP:
		return "REP"
	case CMAttrRTU:
		return "RTU"
	case CMAttrDREQ:
		return "DREQ"
	case CMAttrDREP:
		return "DREP"
	case CMAttrSIDRQ:
		return "SIDR_REQ"
	case CMAttrSIDRP:
		return "SIDR_REP"
	case CMAttrLAP:
		return "LAP"
	case CMAttrAPR:
		return "APR"
	}
	return fmt.Sprintf("0x%02x", id)
}
