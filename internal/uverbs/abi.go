// Package uverbs encodes and decodes the structures of the uverbs ABI
// (include/uapi/rdma/ib_user_verbs.h): the bodies of the legacy write()
// commands on /dev/infiniband/uverbsN, their responses, work completions
// and async event records. It does no I/O: the actuator sends QUERY_QP and
// MODIFY_QP bodies through RDMA_VERBS_IOCTL on a borrowed file, hca-check
// writes whole commands on its own file.
//
// Every size and offset is checked by the unit tests against
// testdata/uapi-<kernel>.txt, printed by testdata/offsets.c compiled against
// the uAPI headers of both lab kernels (Debian 6.1.0-57 and 6.12.117: the
// same for every item here).
package uverbs

import (
	"encoding/binary"
	"fmt"
)

// Legacy write() command numbers (enum ib_uverbs_write_cmds).
const (
	CmdGetContext = 0
	CmdAllocPD    = 3
	CmdDeallocPD  = 4
	CmdCreateCQ   = 18
	CmdDestroyCQ  = 20
	CmdPollCQ     = 21
	CmdCreateQP   = 24
	CmdQueryQP    = 25
	CmdModifyQP   = 26
	CmdDestroyQP  = 27
	CmdPostSend   = 28
	CmdPostRecv   = 29
)

// Sizes of the structs, without their flexible driver_data[] tails.
const (
	HdrSize            = 8      // struct ib_uverbs_cmd_hdr
	GetContextSize     = 8      // struct ib_uverbs_get_context
	GetContextRespSize = 8      // struct ib_uverbs_get_context_resp
	AllocPDSize        = 8      // struct ib_uverbs_alloc_pd
	AllocPDRespSize    = 4      // struct ib_uverbs_alloc_pd_resp
	DeallocPDSize      = 4      // struct ib_uverbs_dealloc_pd
	CreateCQSize       = 32     // struct ib_uverbs_create_cq
	CreateCQRespSize   = 8      // struct ib_uverbs_create_cq_resp
	DestroyCQSize      = 16     // struct ib_uverbs_destroy_cq
	DestroyCQRespSize  = 8      // struct ib_uverbs_destroy_cq_resp
	CreateQPSize       = 56     // struct ib_uverbs_create_qp
	CreateQPRespSize   = 32     // struct ib_uverbs_create_qp_resp
	DestroyQPSize      = 16     // struct ib_uverbs_destroy_qp
	DestroyQPRespSize  = 4      // struct ib_uverbs_destroy_qp_resp
	QPDestSize         = 32     // struct ib_uverbs_qp_dest
	ModifyQPSize       = 112    // struct ib_uverbs_modify_qp
	QueryQPSize        = 16     // struct ib_uverbs_query_qp
	QueryQPRespSize    = 128    // struct ib_uverbs_query_qp_resp
	PostSendSize       = 24     // struct ib_uverbs_post_send (then the WRs)
	SendWRSize         = 56     // struct ib_uverbs_send_wr
	PostSendRespSize   = 4      // struct ib_uverbs_post_send_resp
	PostRecvSize       = 24     // struct ib_uverbs_post_recv (then the WRs)
	RecvWRSize         = 16     // struct ib_uverbs_recv_wr
	PostRecvRespSize   = 4      // struct ib_uverbs_post_recv_resp
	PollCQSize         = 16     // struct ib_uverbs_poll_cq
	PollCQRespSize     = 8      // struct ib_uverbs_poll_cq_resp (then the WCs)
	WCSize             = 48     // struct ib_uverbs_wc
	AsyncEventDescSize = 16     // struct ib_uverbs_async_event_desc
	qpTypeRC           = 2      // IB_QPT_RC (the ABI uses enum ib_qp_type's numbers)
	wrSend             = 2      // IB_UVERBS_WR_SEND
	SendSignaled       = 1 << 1 // IB_SEND_SIGNALED (kernel ib_verbs.h; IBV_SEND_SIGNALED)
)

// Header frames a legacy write(): struct ib_uverbs_cmd_hdr {command u32,
// in_words u16 (the whole write, header included, in 4-byte words),
// out_words u16 (the response's size in words)} followed by the body. The
// body's first field is the user address of the response buffer for
// commands that have one.
func Header(cmd uint32, body []byte, respLen int) ([]byte, error) {
	n := HdrSize + len(body)
	if n%4 != 0 || respLen%4 != 0 || n/4 > 0xffff || respLen/4 > 0xffff {
		return nil, fmt.Errorf("uverbs command %d: %d bytes in, %d out: not a whole number of words", cmd, n, respLen)
	}
	b := make([]byte, n)
	binary.LittleEndian.PutUint32(b[0:], cmd)
	binary.LittleEndian.PutUint16(b[4:], uint16(n/4))
	binary.LittleEndian.PutUint16(b[6:], uint16(respLen/4))
	copy(b[HdrSize:], body)
	return b, nil
}

// Dest is struct ib_uverbs_qp_dest (32 bytes): an address vector.
type Dest struct {
	DGID         [16]byte `json:"dgid"`          // @0
	FlowLabel    uint32   `json:"flow_label"`    // @16
	DLID         uint16   `json:"dlid"`          // @20 (@22 reserved)
	SGIDIndex    uint8    `json:"sgid_index"`    // @24
	HopLimit     uint8    `json:"hop_limit"`     // @25
	TrafficClass uint8    `json:"traffic_class"` // @26
	SL           uint8    `json:"sl"`            // @27
	SrcPathBits  uint8    `json:"src_path_bits"` // @28
	StaticRate   uint8    `json:"static_rate"`   // @29
	IsGlobal     bool     `json:"is_global"`     // @30
	PortNum      uint8    `json:"port_num"`      // @31
}

// Put encodes d into b[0:32].
func (d *Dest) Put(b []byte) {
	copy(b[0:16], d.DGID[:])
	binary.LittleEndian.PutUint32(b[16:], d.FlowLabel)
	binary.LittleEndian.PutUint16(b[20:], d.DLID)
	b[24], b[25], b[26], b[27] = d.SGIDIndex, d.HopLimit, d.TrafficClass, d.SL
	b[28], b[29], b[31] = d.SrcPathBits, d.StaticRate, d.PortNum
	if d.IsGlobal {
		b[30] = 1
	}
}

// GetDest decodes b[0:32].
func GetDest(b []byte) Dest {
	var d Dest
	copy(d.DGID[:], b[0:16])
	d.FlowLabel = binary.LittleEndian.Uint32(b[16:])
	d.DLID = binary.LittleEndian.Uint16(b[20:])
	d.SGIDIndex, d.HopLimit, d.TrafficClass, d.SL = b[24], b[25], b[26], b[27]
	d.SrcPathBits, d.StaticRate, d.IsGlobal, d.PortNum = b[28], b[29], b[30] != 0, b[31]
	return d
}

// Modify is struct ib_uverbs_modify_qp (112 bytes). Fields not in AttrMask
// are sent as they are (zero unless set) and ignored by the kernel.
type Modify struct {
	Dest             Dest   // dest @0
	AltDest          Dest   // alt_dest @32
	Handle           uint32 // qp_handle @64: the uverbs object id
	AttrMask         uint32 // attr_mask @68
	QKey             uint32 // qkey @72
	RQPSN            uint32 // rq_psn @76
	SQPSN            uint32 // sq_psn @80
	DestQPN          uint32 // dest_qp_num @84
	AccessFlags      uint32 // qp_access_flags @88
	PKeyIndex        uint16 // pkey_index @92
	AltPKeyIndex     uint16 // alt_pkey_index @94
	State            uint8  // qp_state @96
	CurState         uint8  // cur_qp_state @97
	PathMTU          uint8  // path_mtu @98
	PathMigState     uint8  // path_mig_state @99
	EnSQDAsyncNotify uint8  // en_sqd_async_notify @100
	MaxRdAtomic      uint8  // max_rd_atomic @101
	MaxDestRdAtomic  uint8  // max_dest_rd_atomic @102
	MinRNRTimer      uint8  // min_rnr_timer @103
	PortNum          uint8  // port_num @104
	Timeout          uint8  // timeout @105
	RetryCnt         uint8  // retry_cnt @106
	RNRRetry         uint8  // rnr_retry @107
	AltPortNum       uint8  // alt_port_num @108 (the kernel wants it equal to alt_dest.port_num)
	AltTimeout       uint8  // alt_timeout @109
}

// Marshal encodes struct ib_uverbs_modify_qp, the body of MODIFY_QP without
// the 8-byte write() header (what UVERBS_ATTR_CORE_IN carries).
func (m *Modify) Marshal() []byte {
	b := make([]byte, ModifyQPSize)
	m.Dest.Put(b[0:32])
	m.AltDest.Put(b[32:64])
	le := binary.LittleEndian
	le.PutUint32(b[64:], m.Handle)
	le.PutUint32(b[68:], m.AttrMask)
	le.PutUint32(b[72:], m.QKey)
	le.PutUint32(b[76:], m.RQPSN)
	le.PutUint32(b[80:], m.SQPSN)
	le.PutUint32(b[84:], m.DestQPN)
	le.PutUint32(b[88:], m.AccessFlags)
	le.PutUint16(b[92:], m.PKeyIndex)
	le.PutUint16(b[94:], m.AltPKeyIndex)
	b[96], b[97], b[98], b[99] = m.State, m.CurState, m.PathMTU, m.PathMigState
	b[100], b[101], b[102], b[103] = m.EnSQDAsyncNotify, m.MaxRdAtomic, m.MaxDestRdAtomic, m.MinRNRTimer
	b[104], b[105], b[106], b[107] = m.PortNum, m.Timeout, m.RetryCnt, m.RNRRetry
	b[108], b[109] = m.AltPortNum, m.AltTimeout
	return b
}

// MarshalQuery encodes struct ib_uverbs_query_qp {response u64 @0 (the
// answer's user address for write(); unused through the ioctl, where the
// answer goes to UVERBS_ATTR_CORE_OUT), qp_handle @8, attr_mask @12}.
func MarshalQuery(response uint64, handle, mask uint32) []byte {
	b := make([]byte, QueryQPSize)
	binary.LittleEndian.PutUint64(b[0:], response)
	binary.LittleEndian.PutUint32(b[8:], handle)
	binary.LittleEndian.PutUint32(b[12:], mask)
	return b
}

// Attr is the decoded struct ib_uverbs_query_qp_resp (128 bytes). It has
// no local QPN.
type Attr struct {
	Dest         Dest   `json:"dest"`           // @0
	AltDest      Dest   `json:"alt_dest"`       // @32
	RQPSN        uint32 `json:"rq_psn"`         // @88
	SQPSN        uint32 `json:"sq_psn"`         // @92
	DestQPN      uint32 `json:"dest_qp_num"`    // @96
	PKeyIndex    uint16 `json:"pkey_index"`     // @104
	AltPKeyIndex uint16 `json:"alt_pkey_index"` // @106
	State        uint8  `json:"qp_state"`       // @108
	PathMTU      uint8  `json:"path_mtu"`       // @110
	PathMigState uint8  `json:"path_mig_state"` // @111
	PortNum      uint8  `json:"port_num"`       // @116
	Timeout      uint8  `json:"timeout"`        // @117
	AltPortNum   uint8  `json:"alt_port_num"`   // @120
	AltTimeout   uint8  `json:"alt_timeout"`    // @121
}

// ParseQueryResp decodes struct ib_uverbs_query_qp_resp.
func ParseQueryResp(b []byte) (Attr, error) {
	if len(b) < QueryQPRespSize {
		return Attr{}, fmt.Errorf("query response of %d bytes, want %d", len(b), QueryQPRespSize)
	}
	le := binary.LittleEndian
	return Attr{
		Dest:         GetDest(b[0:32]),
		AltDest:      GetDest(b[32:64]),
		RQPSN:        le.Uint32(b[88:]),
		SQPSN:        le.Uint32(b[92:]),
		DestQPN:      le.Uint32(b[96:]),
		PKeyIndex:    le.Uint16(b[104:]),
		AltPKeyIndex: le.Uint16(b[106:]),
		State:        b[108],
		PathMTU:      b[110],
		PathMigState: b[111],
		PortNum:      b[116],
		Timeout:      b[117],
		AltPortNum:   b[120],
		AltTimeout:   b[121],
	}, nil
}
