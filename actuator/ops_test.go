package actuator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/uverbs"
	"github.com/apmwatch/apmwatch/rdmanl"
	"golang.org/x/sys/unix"
)

// fakeQP is a kernel stand-in behind the ioctl: it decodes the attributes
// the way uverbs_ioctl.c does (from the encoded header) and keeps one QP.
type fakeQP struct {
	attr     Attr
	handle   uint32
	gone     bool
	altErr   error // returned for IB_QP_ALT_PATH
	modifies []Modify
	buffers  map[uint64][]byte
	// rows, when set, replaces the netlink table derived from the QP.
	rows func() []rdmanl.QP
}

// row is rdma netlink's row of the fake QP (owner pid 42, QPN 17).
func (f *fakeQP) row() rdmanl.QP {
	return rdmanl.QP{Device: "rxe0", LQPN: 17, RQPN: f.attr.DestQPN, Type: event.QPTypeRC, State: event.QPState(f.attr.State),
		Port: uint32(f.attr.PortNum), PathMig: event.MigState(f.attr.PathMigState), HasPathMig: true, HasRemote: true, PID: 42, Comm: "app"}
}

func (f *fakeQP) netlink() ([]rdmanl.QP, error) {
	if f.rows != nil {
		return f.rows(), nil
	}
	if f.gone {
		return nil, nil
	}
	return []rdmanl.QP{f.row()}, nil
}

func (f *fakeQP) ioctl(object, method uint16, build func(ptr func([]byte) uint64) []attr) error {
	f.buffers = map[uint64][]byte{}
	next := uint64(0x1000)
	as := build(func(b []byte) uint64 {
		if len(b) == 0 {
			return 0
		}
		next += 0x1000
		f.buffers[next] = b
		return next
	})
	hdr := encodeIoctl(object, method, 14, as)
	if int(binary.LittleEndian.Uint16(hdr)) != len(hdr) {
		return unix.EINVAL
	}
	if object != objectDevice || method != methodInvokeWrit {
		return unix.EPROTONOSUPPORT
	}
	var cmd uint64
	var in, out []byte
	for _, a := range as {
		switch a.id {
		case attrWriteCmd:
			if a.len != 8 {
				return unix.EINVAL
			}
			cmd = a.data
		case attrCoreIn:
			in = f.buffers[a.data]
		case attrCoreOut:
			out = f.buffers[a.data]
		}
	}
	h := binary.LittleEndian.Uint32(in[8:])
	if cmd == cmdModifyQP {
		h = binary.LittleEndian.Uint32(in[64:])
	}
	if f.gone || h != f.handle {
		return unix.ENOENT
	}
	switch cmd {
	case cmdQueryQP:
		if len(in) != queryQPSize || len(out) < queryQPRespSize {
			return unix.ENOSPC
		}
		f.attr.Dest.Put(out[0:])
		f.attr.AltDest.Put(out[32:])
		binary.LittleEndian.PutUint32(out[96:], f.attr.DestQPN)
		out[108], out[111], out[116], out[120] = f.attr.State, f.attr.PathMigState, f.attr.PortNum, f.attr.AltPortNum
		binary.LittleEndian.PutUint16(out[20+32:], f.attr.AltDest.DLID)
	case cmdModifyQP:
		if len(in) != modifyQPSize {
			return unix.ENOSPC
		}
		mask := binary.LittleEndian.Uint32(in[68:])
		m := Modify{Handle: h, AttrMask: mask, PathMigState: in[99], AltPortNum: in[108], AltDest: uverbs.GetDest(in[32:64])}
		f.modifies = append(f.modifies, m)
		if mask&event.AttrAltPath != 0 {
			if f.altErr != nil {
				return f.altErr
			}
			f.attr.AltPortNum, f.attr.AltDest = m.AltPortNum, m.AltDest
		}
		if mask&event.AttrPathMigState != 0 {
			f.attr.PathMigState = m.PathMigState
		}
	default:
		return unix.EOPNOTSUPP
	}
	return nil
}

func fixtureRoots(t *testing.T, linkLayer string) roots {
	t.Helper()
	d := t.TempDir()
	p := filepath.Join(d, "ib", "rxe0", "ports", "1")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(p, "link_layer"), []byte(linkLayer+"\n"), 0o644)
	os.WriteFile(filepath.Join(p, "state"), []byte("4: ACTIVE\n"), 0o644)
	return roots{ib: filepath.Join(d, "ib")}
}

func setup(t *testing.T, mig event.MigState, ll string) (*Actuator, *Borrowed, *Target, *fakeQP, *[]LogEntry) {
	f := &fakeQP{handle: 2, attr: Attr{State: uint8(event.StateRTS), PathMigState: uint8(mig), PortNum: 1, DestQPN: 17}}
	var log []LogEntry
	a := &Actuator{Log: func(e LogEntry) { log = append(log, e) }, Now: nowFixed, roots: fixtureRoots(t, ll), Rows: f.netlink}
	b := &Borrowed{FD: -1, DriverID: 14, io: f}
	return a, b, &Target{PID: 42, Device: "rxe0", QPN: 17, Handle: 2, Row: f.row()}, f, &log
}

func TestRearmChecksSendsVerifies(t *testing.T) {
	a, b, tg, f, log := setup(t, event.MigMigrated, "InfiniBand")
	res := &Result{}
	if err := a.act(&Request{Op: OpRearm}, b, tg, res); err != nil {
		t.Fatal(err)
	}
	if len(f.modifies) != 1 || f.modifies[0].AttrMask != event.AttrPathMigState || f.modifies[0].PathMigState != 1 {
		t.Fatalf("modifies %+v, want one PATH_MIG_STATE=REARM", f.modifies)
	}
	if res.After == nil || event.MigState(res.After.PathMigState) != event.MigRearm {
		t.Errorf("after %+v", res.After)
	}
	if len(res.Changes) != 1 || res.Changes[0] != "path_mig_state: MIGRATED -> REARM" {
		t.Errorf("changes %v", res.Changes)
	}
	var steps []string
	for _, e := range *log {
		steps = append(steps, e.Step)
	}
	if strings.Join(steps, ",") != "check,send,verify" {
		t.Errorf("logged steps %v", steps)
	}
	// Again: wrong state, nothing sent.
	err := a.act(&Request{Op: OpRearm}, b, tg, &Result{})
	if !errors.Is(err, ErrWrongState) || len(f.modifies) != 1 {
		t.Errorf("second rearm: %v, %d modifies", err, len(f.modifies))
	}
}

func TestDryRunSendsNothing(t *testing.T) {
	a, b, tg, f, _ := setup(t, event.MigMigrated, "Ethernet")
	res := &Result{}
	alt := &AltPath{Port: 1, Dest: Dest{DLID: 3}}
	if err := a.act(&Request{Op: OpRearm, DryRun: true, Alt: alt}, b, tg, res); err != nil {
		t.Fatal(err)
	}
	if len(f.modifies) != 0 || res.After != nil || len(res.Commands) != 2 || res.Commands[0].Sent {
		t.Fatalf("dry run: modifies %v, result %+v", f.modifies, res)
	}
	if res.Commands[0].What != "alt_path" || res.Commands[1].What != "rearm" || !strings.Contains(res.Note, "RoCE") {
		t.Errorf("dry run commands %+v note %q", res.Commands, res.Note)
	}
	// The shown body is exactly what would be sent.
	want := altModify(2, alt)
	if res.Commands[0].Body != hexOf(want.Marshal()) {
		t.Errorf("body %s", res.Commands[0].Body)
	}
}

func TestRefusalsAreClassified(t *testing.T) {
	a, b, tg, f, _ := setup(t, event.MigMigrated, "Ethernet")
	f.altErr = unix.EINVAL
	err := a.act(&Request{Op: OpRearm, Alt: &AltPath{Port: 1, Dest: Dest{DLID: 3}}}, b, tg, &Result{})
	if !errors.Is(err, ErrRoCE) || !strings.Contains(err.Error(), "APM is InfiniBand-only") {
		t.Errorf("alt on RoCE: %v", err)
	}
	if len(f.modifies) != 1 || event.MigState(f.attr.PathMigState) != event.MigMigrated {
		t.Errorf("rearm sent after a refused alternate: %+v", f.modifies)
	}
	a, b, tg, f, _ = setup(t, event.MigArmed, "InfiniBand")
	f.altErr = unix.EINVAL
	if err := a.act(&Request{Op: OpLoadAlt, Alt: &AltPath{Port: 1, Dest: Dest{DLID: 3}}}, b, tg, &Result{}); !errors.Is(err, ErrRefused) {
		t.Errorf("EINVAL on IB: %v", err)
	}
	// The QP vanishes between the check and the command.
	a, b, tg, f, _ = setup(t, event.MigMigrated, "InfiniBand")
	a.BeforeSend = func(Target) { f.gone = true }
	if err := a.act(&Request{Op: OpRearm}, b, tg, &Result{}); !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "no longer exists") {
		t.Errorf("vanished qp: %v", err)
	}
	// migrate needs ARMED.
	a, b, tg, _, _ = setup(t, event.MigRearm, "InfiniBand")
	if err := a.act(&Request{Op: OpMigrate}, b, tg, &Result{}); !errors.Is(err, ErrWrongState) {
		t.Errorf("migrate from REARM: %v", err)
	}
}

func TestFindRowAndMatch(t *testing.T) {
	rows := []rdmanl.QP{
		{Device: "rxe0", LQPN: 17, RQPN: 17, Type: event.QPTypeRC, State: event.StateRTS, PID: 5, Comm: "app", Port: 1, SQPSN: 10, RQPSN: 20},
		{Device: "rxe1", LQPN: 17, RQPN: 17, Type: event.QPTypeRC, State: event.StateRTS, PID: 5},
		{Device: "rxe0", LQPN: 18, Type: event.QPTypeRC, Kernel: true, Comm: "rpcrdma"},
		{Device: "rxe0", LQPN: 19, Type: event.QPTypeUD, PID: 5},
	}
	for _, tc := range []struct {
		pid  int
		dev  string
		qpn  uint32
		want error
	}{
		{5, "", 17, ErrAmbiguous}, {5, "rxe0", 17, nil}, {6, "rxe0", 17, ErrNotFound},
		{5, "rxe0", 18, ErrKernelQP}, {5, "rxe0", 19, ErrWrongState}, {5, "rxe0", 99, ErrNotFound},
	} {
		_, err := findRow(rows, tc.pid, tc.dev, tc.qpn)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("findRow(%d, %q, %d) = %v, want %v", tc.pid, tc.dev, tc.qpn, err, tc.want)
		}
	}
	cs := []candidate{
		{1, Attr{DestQPN: 17, State: 3, PortNum: 1, SQPSN: 10, RQPSN: 20}},
		{2, Attr{DestQPN: 17, State: 3, PortNum: 1, SQPSN: 11, RQPSN: 20}},
		{3, Attr{DestQPN: 18, State: 3, PortNum: 1}},
	}
	if m := matchRow(cs, rows[0]); len(m) != 1 || m[0].handle != 1 {
		t.Errorf("psn tie-break: %+v", m)
	}
	cs[1].attr.SQPSN = 10
	if m := matchRow(cs, rows[0]); len(m) != 2 {
		t.Errorf("identical candidates must stay ambiguous: %+v", m)
	}
}

func TestOwnerFiles(t *testing.T) {
	d := t.TempDir()
	r := roots{proc: filepath.Join(d, "proc"), verbs: filepath.Join(d, "verbs")}
	fd := filepath.Join(r.proc, "7", "fd")
	os.MkdirAll(fd, 0o755)
	os.MkdirAll(filepath.Join(r.verbs, "uverbs1"), 0o755)
	os.WriteFile(filepath.Join(r.verbs, "uverbs1", "ibdev"), []byte("rxe1\n"), 0o644)
	os.Symlink("/dev/infiniband/uverbs1", filepath.Join(fd, "5"))
	os.Symlink("/dev/null", filepath.Join(fd, "0"))
	fs, err := r.ownerFiles(7, "rxe1")
	if err != nil || len(fs) != 1 || fs[0].FD != 5 || fs[0].Uverbs != "uverbs1" {
		t.Errorf("owner files %+v %v", fs, err)
	}
	if fs, _ := r.ownerFiles(7, "rxe0"); len(fs) != 0 {
		t.Errorf("files for another device: %+v", fs)
	}
}

func TestHandlesFromProbes(t *testing.T) {
	h := NewHandles()
	h.Observe(&event.Event{Kind: event.KindModify, PID: 9, Device: "rxe0", QPN: 17, Modify: &event.Modify{Origin: event.OriginUser, UHandle: 4}})
	h.Observe(&event.Event{Kind: event.KindModify, Device: "rxe0", QPN: 18, Modify: &event.Modify{Origin: event.OriginKernel, UHandle: 9}})
	if v, ok := h.Lookup("rxe0", 17); !ok || v != 4 {
		t.Errorf("lookup 17: %d %v", v, ok)
	}
	if _, ok := h.Lookup("rxe0", 18); ok {
		t.Error("a kernel QP has no handle")
	}
	h.Observe(&event.Event{Kind: event.KindQPDestroy, Device: "rxe0", QPN: 17})
	if _, ok := h.Lookup("rxe0", 17); ok {
		t.Error("handle kept after destroy")
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out)
}

func nowFixed() time.Time { return time.Unix(1000, 0) }

// An operation asks rdma netlink for the one QP it acts on (Find) rather
// than the whole table; without Find, the table is read and filtered.
func TestFindReadsOneQP(t *testing.T) {
	a, _, tg, f, _ := setup(t, event.MigMigrated, "InfiniBand")
	other := rdmanl.QP{Device: "rxe1", LQPN: 17, PID: 7, Type: event.QPTypeRC}
	f.rows = func() []rdmanl.QP { return []rdmanl.QP{other, f.row()} }
	if row, err := a.confirm(tg, f.attr, "before"); err != nil || row.Device != "rxe0" {
		t.Fatalf("from the table: %+v, %v", row, err)
	}
	var asked []string
	a.Rows = func() ([]rdmanl.QP, error) { t.Fatal("the whole table read"); return nil, nil }
	a.Find = func(dev string, qpn uint32) ([]rdmanl.QP, error) {
		asked = append(asked, fmt.Sprintf("%s/%d", dev, qpn))
		return []rdmanl.QP{f.row()}, nil
	}
	if _, err := a.confirm(tg, f.attr, "before"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.roots.netlinkOwner(a, func() Allow { return Allow{} })("rxe0", 17); err != nil && !errors.Is(err, ErrNoProcess) {
		t.Fatal(err)
	}
	if strings.Join(asked, ",") != "rxe0/17,rxe0/17" {
		t.Errorf("asked %v, want the one qp twice", asked)
	}
}

// The owner lookup reads the start time always, the uids and cgroup only
// when the allowlist checks them.
func TestOwnerReadsWhatTheAllowlistChecks(t *testing.T) {
	a, _, _, f, _ := setup(t, event.MigMigrated, "InfiniBand")
	d := t.TempDir()
	a.roots.proc = d
	os.MkdirAll(filepath.Join(d, "42"), 0o755)
	fields := make([]string, 50)
	for i := range fields {
		fields[i] = "0"
	}
	fields[0], fields[19] = "S", "777" // fields 3 (state) and 22 (start time)
	os.WriteFile(filepath.Join(d, "42", "stat"), []byte("42 (app) "+strings.Join(fields, " ")+"\n"), 0o644)
	os.WriteFile(filepath.Join(d, "42", "status"), []byte("Name:\tapp\nUid:\t1000\t1000\t1000\t1000\n"), 0o644)
	os.WriteFile(filepath.Join(d, "42", "cgroup"), []byte("0::/system.slice/app.service\n"), 0o644)
	a.Find = func(string, uint32) ([]rdmanl.QP, error) { return []rdmanl.QP{f.row()}, nil }
	for _, c := range []struct {
		allow      Allow
		uids, cgrp bool
	}{
		{Allow{Comms: []string{"app"}}, false, false},
		{Allow{UIDs: []uint32{1000}}, true, false},
		{Allow{Units: []string{"app.service"}}, false, true},
		{Allow{Cgroups: []string{"/system.slice"}, Pods: []string{"ab"}}, false, true},
	} {
		o, err := a.roots.netlinkOwner(a, func() Allow { return c.allow })("rxe0", 17)
		if err != nil || o.Start != 777 || o.PID != 42 || o.Row.LQPN != 17 {
			t.Fatalf("%+v: %+v, %v", c.allow, o, err)
		}
		if (len(o.UIDs) == 3) != c.uids || (o.Cgroup == "/system.slice/app.service") != c.cgrp {
			t.Errorf("%+v: uids %v cgroup %q, want read: uids %v cgroup %v", c.allow, o.UIDs, o.Cgroup, c.uids, c.cgrp)
		}
	}
}
