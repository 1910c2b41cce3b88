package uverbs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"
)

// uapi reads testdata/uapi-<kernel>.txt ("name value" lines printed by
// testdata/offsets.c compiled against that kernel's uAPI headers).
func uapi(t *testing.T, kernel string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile("testdata/uapi-" + kernel + ".txt")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) != 2 {
			t.Fatalf("%s: bad line %q", kernel, s.Text())
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Fatalf("%s: bad line %q", kernel, s.Text())
		}
		m[f[0]] = v
	}
	return m
}

var kernels = []string{"6.1", "6.12"}

// off is the offset of struct s's field f in kernel k's headers.
func off(t *testing.T, u map[string]uint64, s, f string) uint64 {
	t.Helper()
	v, ok := u["ib_uverbs_"+s+"."+f]
	if !ok {
		t.Fatalf("no offset for %s.%s", s, f)
	}
	return v
}

func TestConstantsMatchUAPI(t *testing.T) {
	for _, k := range kernels {
		u := uapi(t, k)
		for name, got := range map[string]int{
			"size.ib_uverbs_cmd_hdr": HdrSize, "size.ib_uverbs_get_context": GetContextSize,
			"size.ib_uverbs_get_context_resp": GetContextRespSize, "size.ib_uverbs_alloc_pd": AllocPDSize,
			"size.ib_uverbs_alloc_pd_resp": AllocPDRespSize, "size.ib_uverbs_dealloc_pd": DeallocPDSize,
			"size.ib_uverbs_create_cq": CreateCQSize, "size.ib_uverbs_create_cq_resp": CreateCQRespSize,
			"size.ib_uverbs_destroy_cq": DestroyCQSize, "size.ib_uverbs_destroy_cq_resp": DestroyCQRespSize,
			"size.ib_uverbs_create_qp": CreateQPSize, "size.ib_uverbs_create_qp_resp": CreateQPRespSize,
			"size.ib_uverbs_destroy_qp": DestroyQPSize, "size.ib_uverbs_destroy_qp_resp": DestroyQPRespSize,
			"size.ib_uverbs_qp_dest": QPDestSize, "size.ib_uverbs_modify_qp": ModifyQPSize,
			"size.ib_uverbs_query_qp": QueryQPSize, "size.ib_uverbs_query_qp_resp": QueryQPRespSize,
			"size.ib_uverbs_post_send": PostSendSize, "size.ib_uverbs_send_wr": SendWRSize,
			"size.ib_uverbs_post_send_resp": PostSendRespSize, "size.ib_uverbs_post_recv": PostRecvSize,
			"size.ib_uverbs_recv_wr": RecvWRSize, "size.ib_uverbs_post_recv_resp": PostRecvRespSize,
			"size.ib_uverbs_poll_cq": PollCQSize, "size.ib_uverbs_poll_cq_resp": PollCQRespSize,
			"size.ib_uverbs_wc": WCSize, "size.ib_uverbs_async_event_desc": AsyncEventDescSize,
			"cmd.IB_USER_VERBS_CMD_GET_CONTEXT": CmdGetContext, "cmd.IB_USER_VERBS_CMD_ALLOC_PD": CmdAllocPD,
			"cmd.IB_USER_VERBS_CMD_DEALLOC_PD": CmdDeallocPD, "cmd.IB_USER_VERBS_CMD_CREATE_CQ": CmdCreateCQ,
			"cmd.IB_USER_VERBS_CMD_POLL_CQ": CmdPollCQ, "cmd.IB_USER_VERBS_CMD_DESTROY_CQ": CmdDestroyCQ,
			"cmd.IB_USER_VERBS_CMD_CREATE_QP": CmdCreateQP, "cmd.IB_USER_VERBS_CMD_QUERY_QP": CmdQueryQP,
			"cmd.IB_USER_VERBS_CMD_MODIFY_QP": CmdModifyQP, "cmd.IB_USER_VERBS_CMD_DESTROY_QP": CmdDestroyQP,
			"cmd.IB_USER_VERBS_CMD_POST_SEND": CmdPostSend, "cmd.IB_USER_VERBS_CMD_POST_RECV": CmdPostRecv,
			"val.IB_UVERBS_WR_SEND": wrSend,
		} {
			if want, ok := u[name]; !ok || want != uint64(got) {
				t.Errorf("%s: %s = %d, uapi says %d (present %v)", k, name, got, want, ok)
			}
		}
	}
}

// field checks that the little-endian field of size bytes at o holds want.
func field(t *testing.T, b []byte, o uint64, size int, want uint64, what string) {
	t.Helper()
	var got uint64
	switch size {
	case 1:
		got = uint64(b[o])
	case 2:
		got = uint64(binary.LittleEndian.Uint16(b[o:]))
	case 4:
		got = uint64(binary.LittleEndian.Uint32(b[o:]))
	case 8:
		got = binary.LittleEndian.Uint64(b[o:])
	}
	if got != want {
		t.Errorf("%s @%d: %#x, want %#x", what, o, got, want)
	}
}

// onlyFields checks that every byte of b outside the given [offset, size]
// ranges is zero.
func onlyFields(t *testing.T, b []byte, what string, ranges ...[2]uint64) {
	t.Helper()
	c := append([]byte(nil), b...)
	for _, r := range ranges {
		for i := r[0]; i < r[0]+r[1]; i++ {
			c[i] = 0
		}
	}
	if !bytes.Equal(c, make([]byte, len(c))) {
		t.Errorf("%s: bytes outside the set fields: %x", what, c)
	}
}

func testDest(seed byte) Dest {
	d := Dest{FlowLabel: 0x12345, DLID: 0xbeef, SGIDIndex: 3, HopLimit: 64, TrafficClass: 0x20,
		SL: 5, SrcPathBits: 1, StaticRate: 7, IsGlobal: true, PortNum: 2}
	for i := range d.DGID {
		d.DGID[i] = seed + byte(i)
	}
	return d
}

func checkDest(t *testing.T, b []byte, u map[string]uint64, seed byte, what string) {
	t.Helper()
	for i := 0; i < 16; i++ {
		if b[i] != seed+byte(i) {
			t.Fatalf("%s: dgid[%d] = %#x", what, i, b[i])
		}
	}
	f := func(name string, size int, want uint64) {
		field(t, b, off(t, u, "qp_dest", name), size, want, what+"."+name)
	}
	f("flow_label", 4, 0x12345)
	f("dlid", 2, 0xbeef)
	f("sgid_index", 1, 3)
	f("hop_limit", 1, 64)
	f("traffic_class", 1, 0x20)
	f("sl", 1, 5)
	f("src_path_bits", 1, 1)
	f("static_rate", 1, 7)
	f("is_global", 1, 1)
	f("port_num", 1, 2)
	if b[22] != 0 || b[23] != 0 {
		t.Errorf("%s: reserved bytes set", what)
	}
}

func TestModifyEncoding(t *testing.T) {
	m := Modify{Dest: testDest(0x10), AltDest: testDest(0xa0), Handle: 0x01020304, AttrMask: 0x44000,
		QKey: 0x11111111, RQPSN: 0x222222, SQPSN: 0x333333, DestQPN: 0x444444, AccessFlags: 0x55,
		PKeyIndex: 0x0606, AltPKeyIndex: 0x0708, State: 3, CurState: 4, PathMTU: 5, PathMigState: 1,
		EnSQDAsyncNotify: 6, MaxRdAtomic: 7, MaxDestRdAtomic: 8, MinRNRTimer: 9, PortNum: 10,
		Timeout: 11, RetryCnt: 12, RNRRetry: 13, AltPortNum: 2, AltTimeout: 14}
	b := m.Marshal()
	for _, k := range kernels {
		u := uapi(t, k)
		if uint64(len(b)) != u["size.ib_uverbs_modify_qp"] {
			t.Fatalf("%s: %d bytes", k, len(b))
		}
		d, alt := off(t, u, "modify_qp", "dest"), off(t, u, "modify_qp", "alt_dest")
		checkDest(t, b[d:d+QPDestSize], u, 0x10, k+" dest")
		checkDest(t, b[alt:alt+QPDestSize], u, 0xa0, k+" alt_dest")
		f := func(name string, size int, want uint64) {
			field(t, b, off(t, u, "modify_qp", name), size, want, k+" modify."+name)
		}
		f("qp_handle", 4, 0x01020304)
		f("attr_mask", 4, 0x44000)
		f("qkey", 4, 0x11111111)
		f("rq_psn", 4, 0x222222)
		f("sq_psn", 4, 0x333333)
		f("dest_qp_num", 4, 0x444444)
		f("qp_access_flags", 4, 0x55)
		f("pkey_index", 2, 0x0606)
		f("alt_pkey_index", 2, 0x0708)
		f("qp_state", 1, 3)
		f("cur_qp_state", 1, 4)
		f("path_mtu", 1, 5)
		f("path_mig_state", 1, 1)
		f("en_sqd_async_notify", 1, 6)
		f("max_rd_atomic", 1, 7)
		f("max_dest_rd_atomic", 1, 8)
		f("min_rnr_timer", 1, 9)
		f("port_num", 1, 10)
		f("timeout", 1, 11)
		f("retry_cnt", 1, 12)
		f("rnr_retry", 1, 13)
		f("alt_port_num", 1, 2)
		f("alt_timeout", 1, 14)
	}
	// The actuator's modify (alternate path and states only) leaves the rest zero.
	a := Modify{Handle: 9, AttrMask: 1 << 18, PathMigState: 1}
	onlyFields(t, a.Marshal(), "rearm modify", [2]uint64{64, 8}, [2]uint64{99, 1})
}

func TestQueryEncoding(t *testing.T) {
	b := MarshalQuery(0x1122334455667788, 9, 0x40000)
	for _, k := range kernels {
		u := uapi(t, k)
		if uint64(len(b)) != u["size.ib_uverbs_query_qp"] {
			t.Fatalf("%s: %d bytes", k, len(b))
		}
		field(t, b, 0, 8, 0x1122334455667788, k+" response")
		field(t, b, off(t, u, "query_qp", "qp_handle"), 4, 9, k+" qp_handle")
		field(t, b, off(t, u, "query_qp", "attr_mask"), 4, 0x40000, k+" attr_mask")
	}
}

func TestQueryRespDecoding(t *testing.T) {
	for _, k := range kernels {
		u := uapi(t, k)
		b := make([]byte, u["size.ib_uverbs_query_qp_resp"])
		d := testDest(0xa0)
		d.Put(b[off(t, u, "query_qp_resp", "alt_dest"):])
		put := func(name string, size int, v uint64) {
			o := off(t, u, "query_qp_resp", name)
			switch size {
			case 1:
				b[o] = byte(v)
			case 2:
				binary.LittleEndian.PutUint16(b[o:], uint16(v))
			case 4:
				binary.LittleEndian.PutUint32(b[o:], uint32(v))
			}
		}
		put("rq_psn", 4, 111)
		put("sq_psn", 4, 222)
		put("dest_qp_num", 4, 17)
		put("pkey_index", 2, 4)
		put("alt_pkey_index", 2, 5)
		put("qp_state", 1, 3)
		put("path_mtu", 1, 3)
		put("path_mig_state", 1, 2)
		put("port_num", 1, 1)
		put("timeout", 1, 14)
		put("alt_port_num", 1, 2)
		put("alt_timeout", 1, 18)
		a, err := ParseQueryResp(b)
		if err != nil {
			t.Fatal(err)
		}
		want := Attr{AltDest: d, RQPSN: 111, SQPSN: 222, DestQPN: 17, PKeyIndex: 4, AltPKeyIndex: 5, State: 3,
			PathMTU: 3, PathMigState: 2, PortNum: 1, Timeout: 14, AltPortNum: 2, AltTimeout: 18}
		if a != want {
			t.Errorf("%s: decoded %+v\nwant %+v", k, a, want)
		}
		p := testDest(0x10)
		p.Put(b[off(t, u, "query_qp_resp", "dest"):])
		if a, _ := ParseQueryResp(b); a.Dest != p || GetDest(b[32:]) != d {
			t.Errorf("%s: dest %+v", k, a.Dest)
		}
	}
	if _, err := ParseQueryResp(make([]byte, 100)); err == nil {
		t.Error("short response accepted")
	}
}

func TestHeader(t *testing.T) {
	b, err := Header(CmdPostSend, PostSend(0xabc, 7, 42), PostSendRespSize)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kernels {
		u := uapi(t, k)
		field(t, b, u["ib_uverbs_cmd_hdr.command"], 4, CmdPostSend, k+" command")
		field(t, b, u["ib_uverbs_cmd_hdr.in_words"], 2, uint64(len(b)/4), k+" in_words (header included)")
		field(t, b, u["ib_uverbs_cmd_hdr.out_words"], 2, 1, k+" out_words")
	}
	if len(b) != HdrSize+PostSendSize+SendWRSize {
		t.Errorf("%d bytes", len(b))
	}
	if _, err := Header(1, make([]byte, 6), 0); err == nil {
		t.Error("a body of 6 bytes framed")
	}
	if _, err := Header(1, make([]byte, 8), 6); err == nil {
		t.Error("a response of 6 bytes framed")
	}
}

func TestCommandBodies(t *testing.T) {
	for _, k := range kernels {
		u := uapi(t, k)
		b := CreateCQ(0x1000, 0x2000, 64)
		field(t, b, 0, 8, 0x1000, k+" create_cq.response")
		field(t, b, off(t, u, "create_cq", "user_handle"), 8, 0x2000, k+" create_cq.user_handle")
		field(t, b, off(t, u, "create_cq", "cqe"), 4, 64, k+" create_cq.cqe")
		field(t, b, off(t, u, "create_cq", "comp_vector"), 4, 0, k+" create_cq.comp_vector")
		field(t, b, off(t, u, "create_cq", "comp_channel"), 4, 0xffffffff, k+" create_cq.comp_channel")

		b = CreateRCQP(0x1000, 0x77, 1, 2, 3, QPCaps{MaxSendWR: 16, MaxRecvWR: 32, MaxSendSGE: 1, MaxRecvSGE: 2, MaxInline: 4}, true)
		q := func(name string, size int, want uint64) {
			field(t, b, off(t, u, "create_qp", name), size, want, k+" create_qp."+name)
		}
		if uint64(len(b)) != u["size.ib_uverbs_create_qp"] {
			t.Errorf("%s: create_qp of %d bytes", k, len(b))
		}
		field(t, b, 0, 8, 0x1000, k+" create_qp.response")
		q("user_handle", 8, 0x77)
		q("pd_handle", 4, 1)
		q("send_cq_handle", 4, 2)
		q("recv_cq_handle", 4, 3)
		q("srq_handle", 4, 0)
		q("max_send_wr", 4, 16)
		q("max_recv_wr", 4, 32)
		q("max_send_sge", 4, 1)
		q("max_recv_sge", 4, 2)
		q("max_inline_data", 4, 4)
		q("sq_sig_all", 1, 1)
		q("qp_type", 1, 2)
		q("is_srq", 1, 0)

		b = PostSend(0x1000, 5, 0x99)
		field(t, b, off(t, u, "post_send", "qp_handle"), 4, 5, k+" post_send.qp_handle")
		field(t, b, off(t, u, "post_send", "wr_count"), 4, 1, k+" post_send.wr_count")
		field(t, b, off(t, u, "post_send", "sge_count"), 4, 0, k+" post_send.sge_count")
		field(t, b, off(t, u, "post_send", "wqe_size"), 4, u["size.ib_uverbs_send_wr"], k+" post_send.wqe_size")
		w := b[off(t, u, "post_send", "send_wr"):]
		if uint64(len(w)) != u["size.ib_uverbs_send_wr"] {
			t.Errorf("%s: send_wr of %d bytes", k, len(w))
		}
		field(t, w, off(t, u, "send_wr", "wr_id"), 8, 0x99, k+" send_wr.wr_id")
		field(t, w, off(t, u, "send_wr", "num_sge"), 4, 0, k+" send_wr.num_sge")
		field(t, w, off(t, u, "send_wr", "opcode"), 4, u["val.IB_UVERBS_WR_SEND"], k+" send_wr.opcode")
		field(t, w, off(t, u, "send_wr", "send_flags"), 4, 2, k+" send_wr.send_flags")
		onlyFields(t, w, k+" send_wr", [2]uint64{0, 8}, [2]uint64{12, 8})

		b = PostRecv(0x1000, 5, 0x98)
		field(t, b, off(t, u, "post_recv", "qp_handle"), 4, 5, k+" post_recv.qp_handle")
		field(t, b, off(t, u, "post_recv", "wr_count"), 4, 1, k+" post_recv.wr_count")
		field(t, b, off(t, u, "post_recv", "wqe_size"), 4, u["size.ib_uverbs_recv_wr"], k+" post_recv.wqe_size")
		w = b[off(t, u, "post_recv", "recv_wr"):]
		field(t, w, off(t, u, "recv_wr", "wr_id"), 8, 0x98, k+" recv_wr.wr_id")
		field(t, w, off(t, u, "recv_wr", "num_sge"), 4, 0, k+" recv_wr.num_sge")

		b = PollCQ(0x1000, 6, 8)
		field(t, b, off(t, u, "poll_cq", "cq_handle"), 4, 6, k+" poll_cq.cq_handle")
		field(t, b, off(t, u, "poll_cq", "ne"), 4, 8, k+" poll_cq.ne")
		field(t, DestroyQP(0x1000, 3), off(t, u, "destroy_qp", "qp_handle"), 4, 3, k+" destroy_qp.qp_handle")
		field(t, DestroyCQ(0x1000, 4), off(t, u, "destroy_cq", "cq_handle"), 4, 4, k+" destroy_cq.cq_handle")
		field(t, DeallocPD(5), off(t, u, "dealloc_pd", "pd_handle"), 4, 5, k+" dealloc_pd.pd_handle")
	}
}

func TestResponseDecoding(t *testing.T) {
	for _, k := range kernels {
		u := uapi(t, k)
		b := make([]byte, u["size.ib_uverbs_get_context_resp"])
		binary.LittleEndian.PutUint32(b[off(t, u, "get_context_resp", "async_fd"):], 7)
		binary.LittleEndian.PutUint32(b[off(t, u, "get_context_resp", "num_comp_vectors"):], 2)
		if c, err := ParseContextResp(b); err != nil || c.AsyncFD != 7 || c.NumCompVectors != 2 {
			t.Errorf("%s: context %+v %v", k, c, err)
		}
		b = make([]byte, u["size.ib_uverbs_create_qp_resp"])
		binary.LittleEndian.PutUint32(b[off(t, u, "create_qp_resp", "qp_handle"):], 3)
		binary.LittleEndian.PutUint32(b[off(t, u, "create_qp_resp", "qpn"):], 0x1234)
		if q, err := ParseQPResp(b); err != nil || q != (QPResp{Handle: 3, QPN: 0x1234}) {
			t.Errorf("%s: qp %+v %v", k, q, err)
		}
		ws := u["size.ib_uverbs_wc"]
		b = make([]byte, u["size.ib_uverbs_poll_cq_resp"]+2*ws)
		binary.LittleEndian.PutUint32(b[off(t, u, "poll_cq_resp", "count"):], 2)
		for i := uint64(0); i < 2; i++ {
			w := b[off(t, u, "poll_cq_resp", "wc")+i*ws:]
			binary.LittleEndian.PutUint64(w[off(t, u, "wc", "wr_id"):], 100+i)
			binary.LittleEndian.PutUint32(w[off(t, u, "wc", "status"):], 12)
			binary.LittleEndian.PutUint32(w[off(t, u, "wc", "opcode"):], 0)
			binary.LittleEndian.PutUint32(w[off(t, u, "wc", "vendor_err"):], 0x81)
			binary.LittleEndian.PutUint32(w[off(t, u, "wc", "qp_num"):], uint32(0x40+i))
			w[off(t, u, "wc", "port_num")] = 9 // not decoded: must not leak into another field
		}
		wcs, err := ParsePollResp(b)
		if err != nil || len(wcs) != 2 || wcs[1] != (WC{WRID: 101, Status: 12, VendorErr: 0x81, QPN: 0x41}) {
			t.Errorf("%s: wcs %+v %v", k, wcs, err)
		}
		binary.LittleEndian.PutUint32(b, 3)
		if _, err := ParsePollResp(b); err == nil {
			t.Errorf("%s: 3 completions decoded from room for 2", k)
		}
		b = make([]byte, u["size.ib_uverbs_async_event_desc"])
		binary.LittleEndian.PutUint64(b[off(t, u, "async_event_desc", "element"):], 2)
		binary.LittleEndian.PutUint32(b[off(t, u, "async_event_desc", "event_type"):], 6)
		if e, err := ParseAsyncEvent(b); err != nil || e != (AsyncEvent{Element: 2, Type: 6}) {
			t.Errorf("%s: event %+v %v", k, e, err)
		}
	}
	if WCStatusName(12) != "RETRY_EXC_ERR" || WCStatusName(5) != "WR_FLUSH_ERR" || WCStatusName(99) != "WC_STATUS(99)" {
		t.Error("wc status names")
	}
}
