package uverbs

import (
	"encoding/binary"
	"fmt"
)

// The command bodies below take resp, the user address of the response
// buffer (the kernel writes the answer there), as their first field.

// GetContext is the body of GET_CONTEXT: struct ib_uverbs_get_context
// {response u64}, no driver data.
func GetContext(resp uint64) []byte { return u64(resp) }

// ContextResp is struct ib_uverbs_get_context_resp.
type ContextResp struct {
	AsyncFD        int32  // @0: a new fd of the caller: the context's async event file
	NumCompVectors uint32 // @4
}

// ParseContextResp decodes struct ib_uverbs_get_context_resp.
func ParseContextResp(b []byte) (ContextResp, error) {
	if err := need(b, GetContextRespSize, "get_context"); err != nil {
		return ContextResp{}, err
	}
	return ContextResp{AsyncFD: int32(binary.LittleEndian.Uint32(b)), NumCompVectors: binary.LittleEndian.Uint32(b[4:])}, nil
}

// AllocPD is the body of ALLOC_PD: struct ib_uverbs_alloc_pd {response}.
// The answer, struct ib_uverbs_alloc_pd_resp, is pd_handle u32 @0.
func AllocPD(resp uint64) []byte { return u64(resp) }

// DeallocPD is the body of DEALLOC_PD: struct ib_uverbs_dealloc_pd {pd_handle u32}.
func DeallocPD(pd uint32) []byte { return u32(pd) }

// CreateCQ is the body of CREATE_CQ: struct ib_uverbs_create_cq {response
// @0, user_handle @8, cqe @16, comp_vector @20, comp_channel s32 @24 (-1:
// none), reserved @28}. The answer is struct ib_uverbs_create_cq_resp
// {cq_handle @0, cqe @4}.
func CreateCQ(resp, userHandle uint64, cqe uint32) []byte {
	b := make([]byte, CreateCQSize)
	le := binary.LittleEndian
	le.PutUint64(b[0:], resp)
	le.PutUint64(b[8:], userHandle)
	le.PutUint32(b[16:], cqe)
	le.PutUint32(b[24:], 0xffffffff) // comp_channel -1
	return b
}

// DestroyCQ is the body of DESTROY_CQ: struct ib_uverbs_destroy_cq
// {response @0, cq_handle @8, reserved @12}; the answer is 8 bytes of
// event counts.
func DestroyCQ(resp uint64, cq uint32) []byte { return handleCmd(resp, cq) }

// QPCaps are the queue sizes of CREATE_QP.
type QPCaps struct {
	MaxSendWR, MaxRecvWR, MaxSendSGE, MaxRecvSGE, MaxInline uint32
}

// CreateRCQP is the body of CREATE_QP for an RC QP without SRQ: struct
// ib_uverbs_create_qp {response @0, user_handle @8 (comes back as the
// element of the QP's async events), pd_handle @16, send_cq_handle @20,
// recv_cq_handle @24, srq_handle @28, max_send_wr @32, max_recv_wr @36,
// max_send_sge @40, max_recv_sge @44, max_inline_data @48, sq_sig_all @52,
// qp_type @53, is_srq @54, reserved @55}. No driver data: only drivers
// whose create_qp needs none accept it.
func CreateRCQP(resp, userHandle uint64, pd, sendCQ, recvCQ uint32, c QPCaps, sigAll bool) []byte {
	b := make([]byte, CreateQPSize)
	le := binary.LittleEndian
	le.PutUint64(b[0:], resp)
	le.PutUint64(b[8:], userHandle)
	le.PutUint32(b[16:], pd)
	le.PutUint32(b[20:], sendCQ)
	le.PutUint32(b[24:], recvCQ)
	le.PutUint32(b[32:], c.MaxSendWR)
	le.PutUint32(b[36:], c.MaxRecvWR)
	le.PutUint32(b[40:], c.MaxSendSGE)
	le.PutUint32(b[44:], c.MaxRecvSGE)
	le.PutUint32(b[48:], c.MaxInline)
	if sigAll {
		b[52] = 1
	}
	b[53] = qpTypeRC
	return b
}

// QPResp is the part of struct ib_uverbs_create_qp_resp used here.
type QPResp struct {
	Handle uint32 // qp_handle @0
	QPN    uint32 // qpn @4
}

// ParseQPResp decodes struct ib_uverbs_create_qp_resp.
func ParseQPResp(b []byte) (QPResp, error) {
	if err := need(b, CreateQPRespSize, "create_qp"); err != nil {
		return QPResp{}, err
	}
	return QPResp{Handle: binary.LittleEndian.Uint32(b), QPN: binary.LittleEndian.Uint32(b[4:])}, nil
}

// DestroyQP is the body of DESTROY_QP: struct ib_uverbs_destroy_qp
// {response @0, qp_handle @8, reserved @12}; the answer is
// events_reported u32.
func DestroyQP(resp uint64, qp uint32) []byte { return handleCmd(resp, qp) }

// PostSend is the body of POST_SEND with one signaled SEND work request
// and no scatter/gather entry (a zero-length message): struct
// ib_uverbs_post_send {response @0, qp_handle @8, wr_count @12, sge_count
// @16, wqe_size @20} then struct ib_uverbs_send_wr {wr_id @0, num_sge @8,
// opcode @12, send_flags @16, ex @20, wr union @24 (unused for RC SEND)}.
// The answer, struct ib_uverbs_post_send_resp, is bad_wr u32.
func PostSend(resp uint64, qp uint32, wrID uint64) []byte {
	b := make([]byte, PostSendSize+SendWRSize)
	le := binary.LittleEndian
	le.PutUint64(b[0:], resp)
	le.PutUint32(b[8:], qp)
	le.PutUint32(b[12:], 1)
	le.PutUint32(b[20:], SendWRSize)
	w := b[PostSendSize:]
	le.PutUint64(w[0:], wrID)
	le.PutUint32(w[12:], wrSend)
	le.PutUint32(w[16:], SendSignaled)
	return b
}

// PostRecv is the body of POST_RECV with one receive work request and no
// scatter/gather entry (room for a zero-length message): struct
// ib_uverbs_post_recv {response @0, qp_handle @8, wr_count @12, sge_count
// @16, wqe_size @20} then struct ib_uverbs_recv_wr {wr_id @0, num_sge @8}.
func PostRecv(resp uint64, qp uint32, wrID uint64) []byte {
	b := make([]byte, PostRecvSize+RecvWRSize)
	le := binary.LittleEndian
	le.PutUint64(b[0:], resp)
	le.PutUint32(b[8:], qp)
	le.PutUint32(b[12:], 1)
	le.PutUint32(b[20:], RecvWRSize)
	le.PutUint64(b[PostRecvSize:], wrID)
	return b
}

// PollCQ is the body of POLL_CQ: struct ib_uverbs_poll_cq {response @0,
// cq_handle @8, ne @12}. The answer is struct ib_uverbs_poll_cq_resp
// {count @0, reserved @4} followed by ne struct ib_uverbs_wc: give it
// PollCQRespSize + ne*WCSize bytes.
func PollCQ(resp uint64, cq, ne uint32) []byte {
	b := handleCmd(resp, cq)
	binary.LittleEndian.PutUint32(b[12:], ne)
	return b
}

// WC is the part of struct ib_uverbs_wc used here.
type WC struct {
	WRID      uint64 `json:"wr_id"`      // @0
	Status    uint32 `json:"status"`     // @8 (enum ib_wc_status)
	Opcode    uint32 `json:"opcode"`     // @12 (enum ib_wc_opcode)
	VendorErr uint32 `json:"vendor_err"` // @16
	QPN       uint32 `json:"qp_num"`     // @28
}

// ParsePollResp decodes the answer of POLL_CQ: the completions it holds.
func ParsePollResp(b []byte) ([]WC, error) {
	if err := need(b, PollCQRespSize, "poll_cq"); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(b))
	if PollCQRespSize+n*WCSize > len(b) {
		return nil, fmt.Errorf("poll_cq answer counts %d completions in %d bytes", n, len(b))
	}
	wcs := make([]WC, n)
	le := binary.LittleEndian
	for i := range wcs {
		w := b[PollCQRespSize+i*WCSize:]
		wcs[i] = WC{WRID: le.Uint64(w), Status: le.Uint32(w[8:]), Opcode: le.Uint32(w[12:]),
			VendorErr: le.Uint32(w[16:]), QPN: le.Uint32(w[28:])}
	}
	return wcs, nil
}

// Work completion status codes (enum ib_wc_status) hca-check looks at.
const (
	WCSuccess     = 0
	WCFlushErr    = 5
	WCRetryExcErr = 12
)

var wcStatusNames = [...]string{
	"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR",
	"WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR",
	"REM_ACCESS_ERR", "REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR",
	"LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR", "INV_EECN_ERR",
	"INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR",
}

// WCStatusName names an enum ib_wc_status value.
func WCStatusName(s uint32) string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return fmt.Sprintf("WC_STATUS(%d)", s)
}

// AsyncEvent is struct ib_uverbs_async_event_desc {element u64 @0 (the
// user_handle of the QP, CQ or SRQ; the port number for port events),
// event_type u32 @8, reserved @12}, one per read() of the async fd.
type AsyncEvent struct {
	Element uint64
	Type    uint32
}

// ParseAsyncEvent decodes one struct ib_uverbs_async_event_desc.
func ParseAsyncEvent(b []byte) (AsyncEvent, error) {
	if err := need(b, AsyncEventDescSize, "async event"); err != nil {
		return AsyncEvent{}, err
	}
	return AsyncEvent{Element: binary.LittleEndian.Uint64(b), Type: binary.LittleEndian.Uint32(b[8:])}, nil
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, v)
	return b
}

func u32(v uint32) []byte {
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, v)
	return b
}

// handleCmd is {response u64 @0, handle u32 @8, u32 @12}.
func handleCmd(resp uint64, h uint32) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, resp)
	binary.LittleEndian.PutUint32(b[8:], h)
	return b
}

func need(b []byte, n int, what string) error {
	if len(b) < n {
		return fmt.Errorf("%s answer of %d bytes, want %d", what, len(b), n)
	}
	return nil
}
