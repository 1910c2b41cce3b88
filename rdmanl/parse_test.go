package rdmanl

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"

	"github.com/apmwatch/apmwatch/event"
)

// The test builds netlink messages the way nldev.c's fill_res_qp_entry and
// res_get_common_dumpit do, with the numbers spelled out here once more
// from include/uapi/rdma/rdma_netlink.h, so a wrong constant in the package
// fails.

const nlaFNested = 1 << 15

func nla(typ uint16, data []byte) []byte {
	b := make([]byte, 4, align4(4+len(data)))
	binary.NativeEndian.PutUint16(b[0:], uint16(4+len(data)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func nlaU32(typ uint16, v uint32) []byte {
	var d [4]byte
	binary.NativeEndian.PutUint32(d[:], v)
	return nla(typ, d[:])
}

func nlaU8(typ uint16, v uint8) []byte   { return nla(typ, []byte{v}) }
func nlaStr(typ uint16, s string) []byte { return nla(typ, append([]byte(s), 0)) }

func nest(typ uint16, parts ...[]byte) []byte {
	var d []byte
	for _, p := range parts {
		d = append(d, p...)
	}
	return nla(typ|nlaFNested, d)
}

func nlmsg(typ, flags uint16, seq uint32, payload ...[]byte) []byte {
	var d []byte
	for _, p := range payload {
		d = append(d, p...)
	}
	b := make([]byte, 16, 16+len(d))
	binary.NativeEndian.PutUint32(b[0:], uint32(16+len(d)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	return append(b, d...)
}

// Attribute numbers as the uapi enum counts them.
const (
	tDevIndex, tDevName, tPortIndex         = 1, 2, 3
	tResQP, tResQPEntry                     = 19, 20
	tLQPN, tRQPN, tRQPSN, tSQPSN            = 21, 22, 23, 24
	tPathMig, tType, tState, tPID, tKernNam = 25, 26, 27, 28, 29
	tPDN, tDriver                           = 60, 52
	typeQPDump                              = 5<<10 + 10 // RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_RES_QP_GET)
)

// rcUserQP is an RC QP of a process, in RTS and REARM, as fill_res_qp_entry
// writes it (port first, then lqpn, rqpn and rq psn for RC/UC, sq psn,
// path mig state for RC/UC/XRC, type, state, pdn for user QPs, pid) plus a
// driver-specific table that must be skipped.
func rcUserQP() []byte {
	return nest(tResQPEntry,
		nlaU32(tPortIndex, 1), nlaU32(tLQPN, 0x1a2), nlaU32(tRQPN, 0x1a3), nlaU32(tRQPSN, 0xabcdef),
		nlaU32(tSQPSN, 0x123456), nlaU8(tPathMig, 1), nlaU8(tType, 2), nlaU8(tState, 3),
		nlaU32(tPDN, 4), nlaU32(tPID, 4242),
		nest(tDriver, nlaStr(54, "vendor"), nlaU32(57, 9)))
}

// kernelUDQP is a kernel UD QP without port: no remote fields, no path mig
// state, a kernel name instead of a pid.
func kernelUDQP() []byte {
	return nest(tResQPEntry, nlaU32(tLQPN, 7), nlaU32(tSQPSN, 0), nlaU8(tType, 4), nlaU8(tState, 1),
		nlaStr(tKernNam, "ib_ipoib"))
}

func TestParseQPs(t *testing.T) {
	payload := append(append(nlaU32(tDevIndex, 3), nlaStr(tDevName, "mlx5_1")...),
		nest(tResQP, rcUserQP(), kernelUDQP())...)
	qps, err := parseQPs(payload)
	if err != nil {
		t.Fatal(err)
	}
	want := []QP{
		{DevIndex: 3, Device: "mlx5_1", Port: 1, LQPN: 0x1a2, RQPN: 0x1a3, Type: event.QPTypeRC, State: event.StateRTS,
			RQPSN: 0xabcdef, SQPSN: 0x123456, PathMig: event.MigRearm, HasPathMig: true, HasRemote: true, PID: 4242, PDN: 4},
		{DevIndex: 3, Device: "mlx5_1", LQPN: 7, Type: event.QPTypeUD, State: event.StateInit, Comm: "ib_ipoib", Kernel: true},
	}
	if len(qps) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(qps), len(want), qps)
	}
	for i := range want {
		if qps[i] != want[i] {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, qps[i], want[i])
		}
	}
}

func TestParseQPsErrors(t *testing.T) {
	good := append(nlaU32(tDevIndex, 0), nlaStr(tDevName, "rxe0")...)
	trunc := rcUserQP()
	trunc = trunc[:len(trunc)-3]
	for name, payload := range map[string][]byte{
		"truncated entry":  append(append([]byte(nil), good...), nla(tResQP|nlaFNested, trunc)...),
		"short u32":        append(append([]byte(nil), good...), nest(tResQP, nest(tResQPEntry, nla(tLQPN, []byte{1, 2})))...),
		"entry with no qp": append(append([]byte(nil), good...), nest(tResQP, nest(tResQPEntry, nlaU8(tState, 3)))...),
		"bad length":       {0xff, 0, 1, 0},
	} {
		if _, err := parseQPs(payload); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseDevice(t *testing.T) {
	d, err := parseDevice(append(nlaU32(tDevIndex, 2), append(nlaStr(tDevName, "rxe0"), nlaU32(tPortIndex, 1)...)...))
	if err != nil || d != (Device{Index: 2, Name: "rxe0", Ports: 1}) {
		t.Errorf("got %+v, %v", d, err)
	}
	if _, err := parseDevice(nlaU32(tDevIndex, 2)); err == nil {
		t.Error("a device without a name parsed")
	}
}

// A dump answer comes as several multi-part messages in one or more
// datagrams and ends with NLMSG_DONE; answers to another sequence number are
// not ours.
func TestCollectDump(t *testing.T) {
	p1 := append(nlaU32(tDevIndex, 0), nest(tResQP, rcUserQP())...)
	p2 := append(nlaU32(tDevIndex, 0), nest(tResQP, kernelUDQP())...)
	dgram := append(append(nlmsg(typeQPDump, flagMulti, 9, p1), nlmsg(typeQPDump, flagMulti, 8, p2)...),
		nlmsg(typeQPDump, flagMulti, 9, p2)...)
	msgs, err := splitMessages(dgram)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("split: %d messages, %v", len(msgs), err)
	}
	var out [][]byte
	done, err := collect(msgs, 9, &out)
	if done || err != nil || len(out) != 2 {
		t.Fatalf("first datagram: done %v err %v, %d payloads", done, err, len(out))
	}
	end, _ := splitMessages(nlmsg(nlmsgDone, flagMulti, 9, []byte{0, 0, 0, 0}))
	if done, err := collect(end, 9, &out); !done || err != nil {
		t.Fatalf("done: %v %v", done, err)
	}
	var rows []QP
	for _, p := range out {
		q, err := parseQPs(p)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, q...)
	}
	if len(rows) != 2 || rows[0].LQPN != 0x1a2 || rows[1].LQPN != 7 {
		t.Errorf("rows %+v", rows)
	}
}

// The kernel answers a bad request (no device index, an unknown device)
// with NLMSG_ERROR carrying -EINVAL, or ends a failed dump with a negative
// NLMSG_DONE.
func TestCollectErrors(t *testing.T) {
	var einval [4]byte
	binary.NativeEndian.PutUint32(einval[:], uint32(0xffffffea)) // -22
	for name, typ := range map[string]uint16{"error": nlmsgError, "done": nlmsgDone} {
		msgs, err := splitMessages(nlmsg(typ, 0, 1, einval[:], make([]byte, 16)))
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		done, err := collect(msgs, 1, &out)
		if !done || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s: done %v err %v, want EINVAL", name, done, err)
		}
	}
	if _, err := splitMessages(nlmsg(typeQPDump, 0, 1)[:10]); err == nil {
		t.Error("a short header split without error")
	}
}

// The request is a dump of RES_QP_GET naming the device by index.
func TestRequest(t *testing.T) {
	b := request(cmdResQPGet, 77, attrU32(attrDevIndex, 5))
	msgs, err := splitMessages(b)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("%v %d", err, len(msgs))
	}
	m := msgs[0]
	if m.typ != typeQPDump || m.flags != 0x301 || m.seq != 77 {
		t.Errorf("header type %d flags %#x seq %d", m.typ, m.flags, m.seq)
	}
	var idx uint32
	if err := forAttrs(m.data, func(typ uint16, d []byte) error {
		if typ == tDevIndex {
			idx = binary.NativeEndian.Uint32(d)
		}
		return nil
	}); err != nil || idx != 5 {
		t.Errorf("device index %d, %v", idx, err)
	}
}

func TestResolveComms(t *testing.T) {
	qps := []QP{{PID: 10}, {PID: 10}, {Kernel: true, Comm: "ib_srp"}, {PID: 11, Comm: "kept"}}
	calls := 0
	ResolveComms(qps, func(pid uint32) string { calls++; return "p" + string(rune('0'+pid-10)) })
	if qps[0].Comm != "p0" || qps[1].Comm != "p0" || qps[2].Comm != "ib_srp" || qps[3].Comm != "kept" || calls != 1 {
		t.Errorf("%+v after %d calls", qps, calls)
	}
}

// A cm_id bound to a QP, as fill_res_cm_id_entry writes it: port, lqpn and
// qp type when a QP is bound, port space, rdma_cm state, addresses,
// cm_idn, pid.
func TestParseCMIDs(t *testing.T) {
	src := make([]byte, 128) // __kernel_sockaddr_storage, AF_INET 192.168.77.1:7471
	binary.NativeEndian.PutUint16(src[0:], 2)
	binary.BigEndian.PutUint16(src[2:], 7471)
	copy(src[4:], []byte{192, 168, 77, 1})
	dst := make([]byte, 128) // AF_INET6 ::ffff:192.168.77.2:40000
	binary.NativeEndian.PutUint16(dst[0:], 10)
	binary.BigEndian.PutUint16(dst[2:], 40000)
	copy(dst[8:], []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 77, 2})
	bound := nest(31, nlaU32(tPortIndex, 1), nlaU32(tLQPN, 17), nlaU8(tType, 2), nlaU32(32, 0x106),
		nlaU8(tState, 9), nla(33, src), nla(34, dst), nlaU32(63, 4), nlaU32(tPID, 300))
	listener := nest(31, nlaU32(32, 0x106), nlaU8(tState, 7), nla(33, src), nlaU32(63, 1), nlaStr(tKernNam, "rdma_cm"))
	payload := append(append(nlaU32(tDevIndex, 0), nlaStr(tDevName, "rxe0")...), nest(30, bound, listener)...)
	ids, err := parseCMIDs(payload)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 {
		t.Fatalf("%d cm_ids: %+v", len(ids), ids)
	}
	c := ids[0]
	if c.Device != "rxe0" || c.Port != 1 || c.LQPN != 17 || c.QPType != 2 || c.PS != 0x106 || c.State != 9 ||
		c.ID != 4 || c.PID != 300 || c.Src.String() != "192.168.77.1:7471" || c.Dst.String() != "[::ffff:192.168.77.2]:40000" {
		t.Errorf("bound cm_id %+v", c)
	}
	if l := ids[1]; l.LQPN != 0 || !l.Kernel || l.Comm != "rdma_cm" || l.Dst.IsValid() {
		t.Errorf("listener %+v", l)
	}
	if _, err := parseCMIDs(append(nlaU32(tDevIndex, 0), nest(30, nest(31, nlaU32(tLQPN, 3)))...)); err == nil {
		t.Error("a cm_id without port space parsed")
	}
}

// A get of one QP is answered with the device's attributes and the QP's
// side by side, no table and no entry nest (res_get_common_doit), in one
// message that is not multi-part.
func TestParseQPReply(t *testing.T) {
	entry := rcUserQP()[4:] // the entry's attributes without its nest header
	payload := append(append(nlaU32(tDevIndex, 3), nlaStr(tDevName, "mlx5_1")...), entry...)
	q, err := parseQPReply(payload)
	want := QP{DevIndex: 3, Device: "mlx5_1", Port: 1, LQPN: 0x1a2, RQPN: 0x1a3, Type: event.QPTypeRC, State: event.StateRTS,
		RQPSN: 0xabcdef, SQPSN: 0x123456, PathMig: event.MigRearm, HasPathMig: true, HasRemote: true, PID: 4242, PDN: 4}
	if err != nil || q != want {
		t.Errorf("got %+v, %v\nwant %+v", q, err, want)
	}
	var out [][]byte
	done, err := collect([]message{{typ: typeQPDump, seq: 9, data: payload}}, 9, &out)
	if !done || err != nil || len(out) != 1 {
		t.Errorf("a single answer: done %v, %v, %d payloads", done, err, len(out))
	}
	for name, p := range map[string][]byte{
		"no qp number": append(nlaU32(tDevIndex, 3), nlaU8(tState, 3)...),
		"bad length":   {0xff, 0, 1, 0},
	} {
		if _, err := parseQPReply(p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A get carries NLM_F_REQUEST alone: with the dump flags the kernel would
// list the whole table.
func TestRequestGet(t *testing.T) {
	msgs, err := splitMessages(requestFlags(cmdResQPGet, flagRequest, 8, append(attrU32(attrDevIndex, 2), attrU32(attrResLQPN, 17)...)))
	if err != nil || len(msgs) != 1 {
		t.Fatalf("%v %d", err, len(msgs))
	}
	if m := msgs[0]; m.typ != typeQPDump || m.flags != 0x1 || m.seq != 8 {
		t.Errorf("header type %d flags %#x seq %d", m.typ, m.flags, m.seq)
	}
	got := map[uint16]uint32{}
	if err := forAttrs(msgs[0].data, func(typ uint16, d []byte) error {
		got[typ] = binary.NativeEndian.Uint32(d)
		return nil
	}); err != nil || got[tDevIndex] != 2 || got[tLQPN] != 17 {
		t.Errorf("attributes %v, %v", got, err)
	}
}
