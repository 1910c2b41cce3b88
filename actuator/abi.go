package actuator

import (
	"encoding/binary"
	"fmt"
)

// ABI numbers and layouts, checked against the uAPI headers of both lab
// kernels (Debian linux-headers 6.1.0-57 and 6.12.117, identical for every
// item here) and the kernel sources named beside them. docs/actuator.md
// lists the same facts with their sources.
const (
	// include/uapi/rdma/rdma_user_ioctl_cmds.h:
	// RDMA_VERBS_IOCTL = _IOWR(RDMA_IOCTL_MAGIC 0x1b, 1, struct ib_uverbs_ioctl_hdr):
	// dir (read|write = 3) << 30 | size 24 << 16 | type 0x1b << 8 | nr 1.
	rdmaVerbsIoctl = 3<<30 | ioctlHdrSize<<16 | 0x1b<<8 | 1 // 0xc0181b01

	attrFMandatory = 1 << 0 // UVERBS_ATTR_F_MANDATORY

	// include/uapi/rdma/ib_user_ioctl_cmds.h
	objectDevice     = 0 // UVERBS_OBJECT_DEVICE
	objectQP         = 4 // UVERBS_OBJECT_QP
	methodInvokeWrit = 0 // UVERBS_METHOD_INVOKE_WRITE (enum uverbs_methods_device)
	methodInfoHandle = 1 // UVERBS_METHOD_INFO_HANDLES
	attrCoreIn       = 0 // UVERBS_ATTR_CORE_IN  (enum uverbs_attrs_invoke_write_cmd_attr_ids)
	attrCoreOut      = 1 // UVERBS_ATTR_CORE_OUT
	attrWriteCmd     = 2 // UVERBS_ATTR_WRITE_CMD
	attrInfoObjectID = 0 // UVERBS_ATTR_INFO_OBJECT_ID (enum uverbs_attrs_info_handles_id)
	attrInfoTotal    = 1 // UVERBS_ATTR_INFO_TOTAL_HANDLES
	attrInfoList     = 2 // UVERBS_ATTR_INFO_HANDLES_LIST

	// include/uapi/rdma/ib_user_verbs.h, enum ib_uverbs_write_cmds
	cmdQueryQP  = 25 // IB_USER_VERBS_CMD_QUERY_QP
	cmdModifyQP = 26 // IB_USER_VERBS_CMD_MODIFY_QP

	// Sizes (the structs without their flexible driver_data[] tails).
	ioctlHdrSize    = 24  // struct ib_uverbs_ioctl_hdr
	ioctlAttrSize   = 16  // struct ib_uverbs_attr
	qpDestSize      = 32  // struct ib_uverbs_qp_dest
	modifyQPSize    = 112 // struct ib_uverbs_modify_qp
	queryQPSize     = 16  // struct ib_uverbs_query_qp
	queryQPRespSize = 128 // struct ib_uverbs_query_qp_resp
)

// Driver ids (include/uapi/rdma/ib_user_ioctl_verbs.h, enum rdma_driver_id;
// 6.12 appends MANA = 20). ib_uverbs_cmd_verbs() rejects a header whose
// driver_id is not the device's with EINVAL before it looks at anything
// else (drivers/infiniband/core/uverbs_ioctl.c).
var driverIDs = map[string]uint32{
	"mlx5": 1, "mlx4": 2, "cxgb4": 4, "mthca": 5, "bnxt_re": 6, "ocrdma": 7,
	"irdma": 9, "i40iw": 9, "vmw_pvrdma": 10, "qedr": 11, "hns": 12, "usnic": 13,
	"rxe": 14, "hfi1": 15, "qib": 16, "efa": 17, "siw": 18, "erdma": 19, "mana": 20,
}

const maxDriverID = 20

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

func (d *Dest) put(b []byte) {
	copy(b[0:16], d.DGID[:])
	binary.LittleEndian.PutUint32(b[16:], d.FlowLabel)
	binary.LittleEndian.PutUint16(b[20:], d.DLID)
	b[24], b[25], b[26], b[27] = d.SGIDIndex, d.HopLimit, d.TrafficClass, d.SL
	b[28], b[29], b[31] = d.SrcPathBits, d.StaticRate, d.PortNum
	if d.IsGlobal {
		b[30] = 1
	}
}

func getDest(b []byte) Dest {
	var d Dest
	copy(d.DGID[:], b[0:16])
	d.FlowLabel = binary.LittleEndian.Uint32(b[16:])
	d.DLID = binary.LittleEndian.Uint16(b[20:])
	d.SGIDIndex, d.HopLimit, d.TrafficClass, d.SL = b[24], b[25], b[26], b[27]
	d.SrcPathBits, d.StaticRate, d.IsGlobal, d.PortNum = b[28], b[29], b[30] != 0, b[31]
	return d
}

// Modify is the part of struct ib_uverbs_modify_qp (112 bytes) the actuator
// sets: the alternate path, the migration state, the states. Fields not in
// AttrMask are sent as zero and ignored by the kernel.
type Modify struct {
	Handle       uint32 // qp_handle @64: the owner's uverbs object id
	AttrMask     uint32 // attr_mask @68
	AltDest      Dest   // alt_dest @32
	AltPKeyIndex uint16 // alt_pkey_index @94
	State        uint8  // qp_state @96
	CurState     uint8  // cur_qp_state @97
	PathMigState uint8  // path_mig_state @99
	AltPortNum   uint8  // alt_port_num @108 (the kernel wants it equal to alt_dest.port_num)
	AltTimeout   uint8  // alt_timeout @109
}

// Marshal encodes struct ib_uverbs_modify_qp, the body of MODIFY_QP without
// the 8-byte write() header (what UVERBS_ATTR_CORE_IN carries).
func (m *Modify) Marshal() []byte {
	b := make([]byte, modifyQPSize)
	m.AltDest.put(b[32:64])
	binary.LittleEndian.PutUint32(b[64:], m.Handle)
	binary.LittleEndian.PutUint32(b[68:], m.AttrMask)
	binary.LittleEndian.PutUint16(b[94:], m.AltPKeyIndex)
	b[96], b[97], b[99] = m.State, m.CurState, m.PathMigState
	b[108], b[109] = m.AltPortNum, m.AltTimeout
	return b
}

// marshalQuery encodes struct ib_uverbs_query_qp {response u64 @0 (unused
// through the ioctl: the answer goes to UVERBS_ATTR_CORE_OUT), qp_handle
// @8, attr_mask @12}.
func marshalQuery(handle, mask uint32) []byte {
	b := make([]byte, queryQPSize)
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

func parseQueryResp(b []byte) (Attr, error) {
	if len(b) < queryQPRespSize {
		return Attr{}, fmt.Errorf("query response of %d bytes, want %d", len(b), queryQPRespSize)
	}
	return Attr{
		Dest:         getDest(b[0:32]),
		AltDest:      getDest(b[32:64]),
		RQPSN:        binary.LittleEndian.Uint32(b[88:]),
		SQPSN:        binary.LittleEndian.Uint32(b[92:]),
		DestQPN:      binary.LittleEndian.Uint32(b[96:]),
		PKeyIndex:    binary.LittleEndian.Uint16(b[104:]),
		AltPKeyIndex: binary.LittleEndian.Uint16(b[106:]),
		State:        b[108],
		PathMTU:      b[110],
		PathMigState: b[111],
		PortNum:      b[116],
		Timeout:      b[117],
		AltPortNum:   b[120],
		AltTimeout:   b[121],
	}, nil
}

// attr is one struct ib_uverbs_attr (16 bytes): attr_id @0, len @2, flags
// @4, attr_data @6 (must be 0 here), data @8 (inline value when len <= 8,
// else a user pointer).
type attr struct {
	id, len, flags uint16
	data           uint64
}

// encodeIoctl lays out struct ib_uverbs_ioctl_hdr {length @0 (24 + 16 *
// num_attrs, checked by the kernel), object_id @2, method_id @4, num_attrs
// @6, reserved1 u64 @8 (0), driver_id @16, reserved2 @20 (0)} followed by
// the attributes.
func encodeIoctl(object, method uint16, driverID uint32, attrs []attr) []byte {
	n := ioctlHdrSize + ioctlAttrSize*len(attrs)
	b := make([]byte, n)
	binary.LittleEndian.PutUint16(b[0:], uint16(n))
	binary.LittleEndian.PutUint16(b[2:], object)
	binary.LittleEndian.PutUint16(b[4:], method)
	binary.LittleEndian.PutUint16(b[6:], uint16(len(attrs)))
	binary.LittleEndian.PutUint32(b[16:], driverID)
	for i, a := range attrs {
		o := ioctlHdrSize + i*ioctlAttrSize
		binary.LittleEndian.PutUint16(b[o:], a.id)
		binary.LittleEndian.PutUint16(b[o+2:], a.len)
		binary.LittleEndian.PutUint16(b[o+4:], a.flags)
		binary.LittleEndian.PutUint64(b[o+8:], a.data)
	}
	return b
}

// invokeWriteAttrs are the attributes of UVERBS_METHOD_INVOKE_WRITE:
// WRITE_CMD is a UVERBS_ATTR_CONST_IN, i.e. a PTR_IN of exactly 8 bytes,
// inline; CORE_IN points at the command body (longer than 8 bytes, so a
// pointer); CORE_OUT points at the response buffer (optional).
func invokeWriteAttrs(cmd uint32, in uint64, inLen int, out uint64, outLen int) []attr {
	as := []attr{
		{id: attrWriteCmd, len: 8, flags: attrFMandatory, data: uint64(cmd)},
		{id: attrCoreIn, len: uint16(inLen), flags: attrFMandatory, data: in},
	}
	if outLen > 0 {
		as = append(as, attr{id: attrCoreOut, len: uint16(outLen), flags: attrFMandatory, data: out})
	}
	return as
}
