package actuator

import (
	"bufio"
	"bytes"
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

// The write() command bodies (modify, query) and the query response are
// internal/uverbs' (its tests check them against both kernels' uAPI); the
// actuator's own part is the ioctl that carries them.
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
