package actuator

import (
	"encoding/binary"

	"github.com/apmwatch/apmwatch/internal/uverbs"
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
	cmdQueryQP  = uverbs.CmdQueryQP  // IB_USER_VERBS_CMD_QUERY_QP
	cmdModifyQP = uverbs.CmdModifyQP // IB_USER_VERBS_CMD_MODIFY_QP

	// Sizes (the structs without their flexible driver_data[] tails).
	ioctlHdrSize    = 24                     // struct ib_uverbs_ioctl_hdr
	ioctlAttrSize   = 16                     // struct ib_uverbs_attr
	qpDestSize      = uverbs.QPDestSize      // struct ib_uverbs_qp_dest
	modifyQPSize    = uverbs.ModifyQPSize    // struct ib_uverbs_modify_qp
	queryQPSize     = uverbs.QueryQPSize     // struct ib_uverbs_query_qp
	queryQPRespSize = uverbs.QueryQPRespSize // struct ib_uverbs_query_qp_resp
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

// The uverbs structures themselves (the MODIFY_QP and QUERY_QP bodies, the
// address vector, the decoded query answer) are internal/uverbs's, shared
// with hca-check; these names keep the actuator's API.
type (
	// Dest is struct ib_uverbs_qp_dest (32 bytes): an address vector.
	Dest = uverbs.Dest
	// Modify is struct ib_uverbs_modify_qp. The actuator sets the
	// alternate path, the migration state and the states; fields not in
	// AttrMask are sent as zero and ignored by the kernel.
	Modify = uverbs.Modify
	// Attr is the decoded struct ib_uverbs_query_qp_resp. It has no local QPN.
	Attr = uverbs.Attr
)

// marshalQuery encodes struct ib_uverbs_query_qp for the ioctl: its
// response field is unused there (the answer goes to UVERBS_ATTR_CORE_OUT).
func marshalQuery(handle, mask uint32) []byte { return uverbs.MarshalQuery(0, handle, mask) }

func parseQueryResp(b []byte) (Attr, error) { return uverbs.ParseQueryResp(b) }

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
