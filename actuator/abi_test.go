package actuator

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"
)

// uapi reads testdata/uapi-<kernel>.txt: offsets and sizes printed by
// testdata/offsets.c compiled against that kernel's uAPI headers.
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
		switch {
		case len(f) == 2 && f[0] == "ioctl":
			v, _ := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
			m["ioctl"] = v
		case f[0] == "sizes":
			for i := 1; i+1 < len(f); i += 2 {
				v, _ := strconv.ParseUint(f[i+1], 10, 64)
				m["size."+f[i]] = v
			}
		case f[0] == "cmds":
			q, _ := strconv.ParseUint(f[1], 10, 64)
			mo, _ := strconv.ParseUint(f[2], 10, 64)
			m["cmd.query"], m["cmd.modify"] = q, mo
		case len(f) == 2:
			v, _ := strconv.ParseUint(f[1], 10, 64)
			m[f[0]] = v
		}
	}
	return m
}

var kernels = []string{"6.1", "6.12"}

func TestConstantsMatchUAPI(t *testing.T) {
	for _, k := range kernels {
		u := uapi(t, k)
		for name, got := range map[string]uint64{
			"ioctl":       rdmaVerbsIoctl,
			"size.hdr":    ioctlHdrSize,
			"size.attr":   ioctlAttrSize,
			"size.dest":   qpDestSize,
			"size.modify": modifyQPSize,
			"size.query":  queryQPSize,
			"size.resp":   queryQPRespSize,
			"cmd.query":   cmdQueryQP,
			"cmd.modify":  cmdModifyQP,
		} {
			if want, ok := u[name]; !ok || want != got {
				t.Errorf("%s: %s = %#x, uapi says %#x (present %v)", k, name, got, want, ok)
			}
		}
	}
}

// field checks that exactly the bytes of one field hold want (little endian).
func field(t *testing.T, b []byte, off uint64, size int, want uint64, what string) {
	t.Helper()
	var got uint64
	switch size {
	case 1:
		got = uint64(b[off])
	case 2:
		got = uint64(binary.LittleEndian.Uint16(b[off:]))
	case 4:
		got = uint64(binary.LittleEndian.Uint32(b[off:]))
	case 8:
		got = binary.LittleEndian.Uint64(b[off:])
	}
	if got != want {
		t.Errorf("%s @%d: %#x, want %#x", what, off, got, want)
	}
}

// covered returns a copy of b with the given ranges zeroed, to check that
// nothing else was written.
func zeroed(b []byte, ranges ...[2]uint64) []byte {
	c := append([]byte(nil), b...)
	for _, r := range ranges {
		for i := r[0]; i < r[0]+r[1]; i++ {
			c[i] = 0
		}
	}
	return c
}

func testDest() Dest {
	d := Dest{FlowLabel: 0x12345, DLID: 0xbeef, SGIDIndex: 3, HopLimit: 64, TrafficClass: 0x20,
		SL: 5, SrcPathBits: 1, StaticRate: 7, IsGlobal: true, PortNum: 2}
	for i := range d.DGID {
		d.DGID[i] = byte(0xa0 + i)
	}
	return d
}

func TestModifyEncoding(t *testing.T) {
	m := Modify{Handle: 0x01020304, AttrMask: 0x40000 | 0x4000, AltDest: testDest(), AltPKeyIndex: 0x0708,
		State: 3, CurState: 3, PathMigState: 1, AltPortNum: 2, AltTimeout: 14}
	b := m.Marshal()
	for _, k := range kernels {
		u := uapi(t, k)
		if uint64(len(b)) != u["size.modify"] {
			t.Fatalf("%s: %d bytes, uapi %d", k, len(b), u["size.modify"])
		}
		alt := u["ib_uverbs_modify_qp.alt_dest"]
		checkDest(t, b[alt:alt+qpDestSize], u, k+" alt_dest")
		f := func(name string, size int, want uint64) {
			field(t, b, u["ib_uverbs_modify_qp."+name], size, want, k+" modify."+name)
		}
		f("qp_handle", 4, 0x01020304)
		f("attr_mask", 4, 0x44000)
		f("alt_pkey_index", 2, 0x0708)
		f("qp_state", 1, 3)
		f("cur_qp_state", 1, 3)
		f("path_mig_state", 1, 1)
		f("alt_port_num", 1, 2)
		f("alt_timeout", 1, 14)
		f("port_num", 1, 0)
		rest := zeroed(b, [2]uint64{alt, qpDestSize}, [2]uint64{u["ib_uverbs_modify_qp.qp_handle"], 8},
			[2]uint64{u["ib_uverbs_modify_qp.alt_pkey_index"], 2}, [2]uint64{u["ib_uverbs_modify_qp.qp_state"], 2},
			[2]uint64{u["ib_uverbs_modify_qp.path_mig_state"], 1}, [2]uint64{u["ib_uverbs_modify_qp.alt_port_num"], 2})
		if !bytes.Equal(rest, make([]byte, len(b))) {
			t.Errorf("%s: bytes outside the set fields: %x", k, rest)
		}
	}
}

func checkDest(t *testing.T, b []byte, u map[string]uint64, what string) {
	t.Helper()
	for i := 0; i < 16; i++ {
		if b[i] != byte(0xa0+i) {
			t.Fatalf("%s: dgid[%d] = %#x", what, i, b[i])
		}
	}
	f := func(name string, size int, want uint64) {
		field(t, b, u["ib_uverbs_qp_dest."+name], size, want, what+"."+name)
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

func TestQueryEncoding(t *testing.T) {
	b := marshalQuery(9, 0x40000)
	for _, k := range kernels {
		u := uapi(t, k)
		if uint64(len(b)) != u["size.query"] {
			t.Fatalf("%s: %d bytes", k, len(b))
		}
		field(t, b, 0, 8, 0, k+" response")
		field(t, b, u["ib_uverbs_query_qp.qp_handle"], 4, 9, k+" qp_handle")
		field(t, b, u["ib_uverbs_query_qp.attr_mask"], 4, 0x40000, k+" attr_mask")
	}
}

func TestQueryRespDecoding(t *testing.T) {
	for _, k := range kernels {
		u := uapi(t, k)
		b := make([]byte, u["size.resp"])
		d := testDest()
		d.Put(b[u["ib_uverbs_query_qp_resp.alt_dest"]:])
		put := func(name string, size int, v uint64) {
			o := u["ib_uverbs_query_qp_resp."+name]
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
		a, err := parseQueryResp(b)
		if err != nil {
			t.Fatal(err)
		}
		want := Attr{AltDest: d, RQPSN: 111, SQPSN: 222, DestQPN: 17, PKeyIndex: 4, AltPKeyIndex: 5, State: 3,
			PathMTU: 3, PathMigState: 2, PortNum: 1, Timeout: 14, AltPortNum: 2, AltTimeout: 18}
		if a != want {
			t.Errorf("%s: decoded %+v\nwant %+v", k, a, want)
		}
		// The dest AV decodes from @0 the same way.
		d.Put(b[0:])
		if a, _ := parseQueryResp(b); a.Dest != d {
			t.Errorf("%s: dest %+v", k, a.Dest)
		}
	}
	if _, err := parseQueryResp(make([]byte, 100)); err == nil {
		t.Error("short response accepted")
	}
}

func TestIoctlEncoding(t *testing.T) {
	as := invokeWriteAttrs(cmdModifyQP, 0x1111222233334444, 112, 0x5555666677778888, 128)
	b := encodeIoctl(objectDevice, methodInvokeWrit, 14, as)
	want := []byte{
		// ib_uverbs_ioctl_hdr: length 24+3*16=72, object DEVICE 0, method INVOKE_WRITE 0, 3 attrs
		72, 0, 0, 0, 0, 0, 3, 0,
		0, 0, 0, 0, 0, 0, 0, 0, // reserved1
		14, 0, 0, 0, 0, 0, 0, 0, // driver_id RXE, reserved2
		// WRITE_CMD (2): len 8, mandatory, inline value 26
		2, 0, 8, 0, 1, 0, 0, 0, 26, 0, 0, 0, 0, 0, 0, 0,
		// CORE_IN (0): len 112, mandatory, pointer
		0, 0, 112, 0, 1, 0, 0, 0, 0x44, 0x44, 0x33, 0x33, 0x22, 0x22, 0x11, 0x11,
		// CORE_OUT (1): len 128, mandatory, pointer
		1, 0, 128, 0, 1, 0, 0, 0, 0x88, 0x88, 0x77, 0x77, 0x66, 0x66, 0x55, 0x55,
	}
	if !bytes.Equal(b, want) {
		t.Errorf("ioctl bytes\n got %x\nwant %x", b, want)
	}
	for _, k := range kernels {
		u := uapi(t, k)
		if u["ib_uverbs_ioctl_hdr.driver_id"] != 16 || u["ib_uverbs_attr.data"] != 8 || u["ib_uverbs_attr.flags"] != 4 ||
			u["ib_uverbs_ioctl_hdr.num_attrs"] != 6 || u["ib_uverbs_ioctl_hdr.reserved2"] != 20 {
			t.Errorf("%s: header/attr layout differs from the encoder", k)
		}
	}
	// Without a response buffer there is no CORE_OUT attribute.
	if n := len(invokeWriteAttrs(cmdModifyQP, 1, 112, 0, 0)); n != 2 {
		t.Errorf("%d attributes without output, want 2", n)
	}
}

func TestAltModifyKeepsPortsEqual(t *testing.T) {
	m := altModify(3, &AltPath{Dest: Dest{DLID: 9, PortNum: 1}, Port: 2, Timeout: 14})
	if m.AltDest.PortNum != 2 || m.AltPortNum != 2 || m.AttrMask != 1<<14 {
		t.Errorf("alt modify %+v: alt_dest.port_num and alt_port_num must both be the alternate port", m)
	}
}
