package collector

import (
	"errors"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
)

func raw(r *apmApmRecord) []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(r)), recordSize)...)
}

func setStr(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}

func header(kind uint8) apmApmRecord {
	var r apmApmRecord
	r.Kind = kind
	r.BootNs = 5_000_000_000
	r.Cpu, r.Pid, r.Tid, r.Qpn = 1, 100, 101, 17
	setStr(r.Comm[:], "lab-pair")
	r.DevIndex, r.Flags = 3, flagDev
	return r
}

var testDecoder = decoder{offset: time.Duration(1_700_000_000) * time.Second,
	names: map[uint64]string{0xffffffffc0001000: "ib_modify_qp_with_udata", 0xffffffffc0002000: "__ib_qp_event_handler"},
	devs:  &devNames{names: map[uint32]string{3: "rxe0"}, tried: map[uint32]time.Time{}}}

func TestDecodeModifyAltPath(t *testing.T) {
	r := header(1)
	r.FuncIp = 0xffffffffc0001000
	r.AttrMask = event.AttrAltPath | event.AttrPathMigState
	r.MigState = 1
	r.Ret = -22
	r.QpType = 2
	r.Flags |= flagUser | flagHasAlt
	r.Uhandle, r.UserHandle = 3, 0x55550000
	r.Alt = apmApmPath{Port: 1, Dlid: 0x12, PkeyIndex: 2, SgidIndex: 1, IsGlobal: 1, Timeout: 14}
	r.Alt.Dgid[15] = 9
	e, err := testDecoder.decode(raw(&r))
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != event.KindModify || e.Device != "rxe0" || e.QPN != 17 || e.Comm != "lab-pair" || e.PID != 100 || e.TID != 101 {
		t.Fatalf("header: %+v", e)
	}
	if want := time.Unix(1_700_000_005, 0); !e.Time.Equal(want) {
		t.Errorf("time %v, want %v", e.Time, want)
	}
	m := e.Modify
	if m.Hook != "ib_modify_qp_with_udata" || m.Origin != event.OriginUser || m.UHandle != 3 || m.UserHandle != 0x55550000 {
		t.Errorf("owner: %+v", m)
	}
	if m.Ret != -22 || m.MigState != event.MigRearm || m.QPType != event.QPTypeRC || m.Primary != nil {
		t.Errorf("modify: %+v", m)
	}
	if m.Alt == nil || m.Alt.Port != 1 || m.Alt.DLID != 0x12 || m.Alt.PKeyIndex != 2 || m.Alt.Timeout != 14 ||
		!m.Alt.IsGlobal || m.Alt.SGIDIndex != 1 || m.Alt.DGID[15] != 9 {
		t.Errorf("alt: %+v", m.Alt)
	}
}

func TestDecodeQPEventHooks(t *testing.T) {
	r := header(2)
	r.EvType = uint8(event.EvPathMig)
	r.FuncIp = 0xffffffffc0002004 // kprobe after endbr64
	r.Flags |= flagKernel
	e, err := testDecoder.decode(raw(&r))
	if err != nil {
		t.Fatal(err)
	}
	if e.QP.Type != event.EvPathMig || e.QP.Hook != "__ib_qp_event_handler" || e.QP.Origin != event.OriginKernel {
		t.Errorf("qp event: %+v", e.QP)
	}
	r.Flags |= flagRawEvent
	r.EvType = 0x07
	r.FuncIp = 0
	e, _ = testDecoder.decode(raw(&r))
	if e.QP.Type != event.EvPathMigErr || e.QP.Origin != event.OriginUnknown {
		t.Errorf("raw mlx event: %+v", e.QP)
	}
}

func TestDecodeCMAndMAD(t *testing.T) {
	r := header(4)
	r.EvType, r.Ret, r.Obj, r.LocalId, r.RemoteId, r.State, r.MigState = 6, -22, 0xffff8880, 0x10, 0x20, 10, 3
	e, _ := testDecoder.decode(raw(&r))
	if n := e.Notify; n.Type != event.EvPathMig || n.Ret != -22 || n.CMID != 0xffff8880 || n.LocalID != 0x10 ||
		n.RemoteID != 0x20 || n.CMState != 10 || n.LapState != 3 {
		t.Errorf("notify: %+v", n)
	}
	r = header(6)
	r.Dir, r.MgmtClass, r.Method, r.AttrId, r.Obj, r.Port, r.MadQpn = 1, 7, 3, 0x19, 0xabc, 1, 1
	r.Flags |= flagFromUMAD
	e, _ = testDecoder.decode(raw(&r))
	if m := e.MAD; m.Dir != event.MADSend || m.AttrID != event.CMAttrLAP || m.TID != 0xabc || !m.FromUser || e.QPN != 0 {
		t.Errorf("mad: %+v qpn %d", m, e.QPN)
	}
	// A REQ or REP this host sends names the connection's QP; one it
	// receives names the peer's: dropped.
	for _, c := range []struct {
		dir  uint8
		attr uint16
		qpn  uint32
	}{{1, 0x10, 77}, {1, 0x13, 77}, {2, 0x10, 0}, {2, 0x13, 0}, {1, 0x14, 0}} {
		r = header(6)
		r.Dir, r.MgmtClass, r.AttrId, r.Qpn = c.dir, 7, c.attr, 77
		if e, _ = testDecoder.decode(raw(&r)); e.QPN != c.qpn {
			t.Errorf("CM MAD dir %d attr %#x: qpn %d, want %d", c.dir, c.attr, e.QPN, c.qpn)
		}
	}
	r = header(5)
	r.AttrId, r.Ret, r.AltDlid = 0x19, -22, 7
	e, _ = testDecoder.decode(raw(&r))
	if h := e.Handler; h.AttrID != event.CMAttrLAP || h.Ret != -22 || h.AltDLID != 7 {
		t.Errorf("handler: %+v", h)
	}
}

func TestDecodeErrors(t *testing.T) {
	r := header(1)
	if _, err := testDecoder.decode(raw(&r)[:10]); !errors.Is(err, errShortRecord) {
		t.Errorf("short record: %v", err)
	}
	r.Flags |= flagHasAlt
	if _, err := testDecoder.decode(raw(&r)[:pathsSize-1]); !errors.Is(err, errShortRecord) {
		t.Errorf("record with an alternate path cut in its paths: %v", err)
	}
	r = header(kindDevName)
	if _, err := testDecoder.decode(raw(&r)[:pathsSize]); !errors.Is(err, errShortRecord) {
		t.Errorf("device name cut: %v", err)
	}
	r.Kind = 99
	if _, err := testDecoder.decode(raw(&r)); err == nil {
		t.Error("unknown kind decoded")
	}
}

// A record without paths comes short (APM_RECORD_SHORT bytes) and decodes
// like the full one.
func TestDecodeShortRecord(t *testing.T) {
	r := header(1)
	r.Flags |= flagUser
	r.AttrMask, r.MigState, r.Uhandle, r.UserHandle = event.AttrPathMigState, 1, 3, 0x55d0
	full, err := testDecoder.decode(raw(&r))
	if err != nil {
		t.Fatal(err)
	}
	short, err := testDecoder.decode(raw(&r)[:shortSize])
	if err != nil {
		t.Fatal(err)
	}
	if *short.Modify != *full.Modify || short.Device != "rxe0" || short.Comm != "lab-pair" || short.Modify.Alt != nil {
		t.Errorf("short record %+v %+v, full %+v %+v", short, short.Modify, full, full.Modify)
	}
}

// A modify's announcement at its entry comes short and decodes to a
// modify-entry: the call's attributes, no return code.
func TestDecodeModifyEntry(t *testing.T) {
	r := header(uint8(apmApmKindAPM_KIND_MODIFY_ENTRY))
	r.FuncIp = 0xffffffffc0001000
	r.Flags |= flagUser
	r.QpType = 2
	r.AttrMask, r.MigState = event.AttrPathMigState, 1
	e, err := testDecoder.decode(raw(&r)[:shortSize])
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != event.KindModifyEntry || e.Boot != r.BootNs || e.TID != 101 || e.QPN != 17 || e.Device != "rxe0" {
		t.Fatalf("header: %+v", e)
	}
	if m := e.Modify; m == nil || m.MigState != event.MigRearm || !m.Has(event.AttrPathMigState) || m.Ret != 0 ||
		m.Hook != "ib_modify_qp_with_udata" || m.Alt != nil || !m.QPType.HasAPM() {
		t.Errorf("modify-entry payload: %+v", m)
	}
}

func TestKindNumbersMatchEvent(t *testing.T) {
	// enum apm_kind in bpf/apmwatch.h uses event.Kind's numbers.
	for k, want := range map[uint8]event.Kind{1: event.KindModify, 2: event.KindQPEvent, 3: event.KindPortEvent,
		4: event.KindCMNotify, 5: event.KindCMHandler, 6: event.KindMAD, 7: event.KindQPCreate, 8: event.KindQPDestroy,
		uint8(apmApmKindAPM_KIND_MODIFY_ENTRY): event.KindModifyEntry} {
		r := header(k)
		e, err := testDecoder.decode(raw(&r))
		if err != nil || e.Kind != want {
			t.Errorf("kind %d: %v %v", k, e, err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	r := header(1)
	r.Flags |= flagUser | flagHasAlt | flagHasPrimary
	r.AttrMask = event.AttrAltPath | event.AttrAV
	buf := raw(&r)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := testDecoder.decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func TestStrCacheBounded(t *testing.T) {
	var c strCache
	a := c.get([]byte("mpi_rank_0"))
	if b := c.get([]byte("mpi_rank_0")); a != "mpi_rank_0" || b != a || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Errorf("second lookup %q, %q: not the cached string", a, b)
	}
	if c.get(nil) != "" || c.get([]byte{}) != "" {
		t.Error("empty name")
	}
	for i := range 3 * maxCachedStrings {
		name := fmt.Sprintf("p%d", i)
		if got := c.get([]byte(name)); got != name {
			t.Fatalf("get(%q) = %q", name, got)
		}
		if len(c.m) > maxCachedStrings {
			t.Fatalf("%d names cached, more than %d", len(c.m), maxCachedStrings)
		}
	}
}

// A device's name (registered or renamed) names the records that follow; it
// is no event. An index nobody named is listed over rdma netlink, at most
// once a second.
func TestDecodeDeviceNames(t *testing.T) {
	listed := 0
	list := func() ([]rdmanl.Device, error) {
		listed++
		return []rdmanl.Device{{Index: 3, Name: "mlx5_0"}}, nil
	}
	now := time.Unix(100, 0)
	d := decoder{devs: newDevNames(list)}
	d.devs.now = func() time.Time { return now }
	r := header(1)
	if e, err := d.decode(raw(&r)); err != nil || e.Device != "mlx5_0" || listed != 1 {
		t.Fatalf("listed device: %+v %v (listed %d times)", e, err, listed)
	}
	n := header(kindDevName)
	setStr(n.Dev[:], "ib_renamed")
	if e, err := d.decode(raw(&n)); e != nil || err != nil {
		t.Fatalf("device name record: %v %v, want no event", e, err)
	}
	if e, _ := d.decode(raw(&r)); e.Device != "ib_renamed" {
		t.Errorf("after the rename: %q", e.Device)
	}
	r.DevIndex = 9
	for i := 0; i < 3; i++ {
		if e, _ := d.decode(raw(&r)); e.Device != "" {
			t.Errorf("unknown index named %q", e.Device)
		}
	}
	if listed != 2 {
		t.Errorf("an unknown index listed %d times in a second, want once (and once at start)", listed-1)
	}
	now = now.Add(2 * time.Second)
	d.decode(raw(&r))
	if listed != 3 {
		t.Errorf("an unknown index not listed again after a second")
	}
	r.Flags &^= flagDev
	if e, _ := d.decode(raw(&r)); e.Device != "" {
		t.Errorf("record without a device named %q", e.Device)
	}
}
