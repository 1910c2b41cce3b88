package output

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/columns"
	"github.com/apmwatch/apmwatch/internal/testkit"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)

// sample has one event of every kind, as the lab produces them.
func sample() []*event.Event {
	base := func(seq uint64, k event.Kind, comm string, pid uint32, dev string, qpn uint32) *event.Event {
		return &event.Event{Seq: seq, Kind: k, Boot: 1000 + seq, Time: t0.Add(time.Duration(seq) * time.Millisecond),
			CPU: 1, PID: pid, TID: pid, Comm: comm, Device: dev, QPN: qpn}
	}
	alt := &event.Path{Port: 1, DLID: 0x11, SGIDIndex: 1, IsGlobal: true, PKeyIndex: 0, Timeout: 14,
		DGID: [16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 168, 14: 77, 15: 2}}
	var es []*event.Event
	e := base(1, event.KindQPCreate, "lab-pair", 200, "rxe0", 17)
	e.Life = &event.QPLife{QPType: event.QPTypeRC, Origin: event.OriginUser}
	es = append(es, e)
	e = base(2, event.KindModify, "lab-pair", 200, "rxe0", 17)
	e.Modify = &event.Modify{QPType: event.QPTypeRC, Origin: event.OriginUser, UHandle: 2, UserHandle: 0x5555,
		AttrMask: event.AttrState | event.AttrAV | event.AttrDestQPN, State: event.StateRTR, DestQPN: 17,
		Primary: &event.Path{Port: 1, DLID: 3, SGIDIndex: 1}, Hook: "ib_modify_qp_with_udata"}
	es = append(es, e)
	e = base(3, event.KindModify, "kworker/u8:0", 12, "rxe0", 18)
	e.Modify = &event.Modify{QPType: event.QPTypeRC, Origin: event.OriginKernel, AttrMask: event.AttrAltPath,
		Alt: alt, Ret: -22, Hook: "ib_modify_qp"}
	es = append(es, e)
	e = base(4, event.KindModify, "lab-pair", 200, "rxe0", 17)
	e.Modify = &event.Modify{QPType: event.QPTypeRC, Origin: event.OriginUser, UHandle: 2, UserHandle: 0x5555,
		AttrMask: event.AttrPathMigState, MigState: event.MigRearm, Hook: "ib_modify_qp_with_udata"}
	es = append(es, e)
	e = base(5, event.KindQPEvent, "lab-inject", 230, "rxe0", 17)
	e.QP = &event.QPEvent{Type: event.EvPathMig, QPType: event.QPTypeRC, Origin: event.OriginUser, Hook: "__ib_qp_event_handler"}
	es = append(es, e)
	e = base(6, event.KindPortEvent, "kworker/0:1", 9, "rxe1", 0)
	e.Port = &event.PortEvent{Type: event.EvPortActive, Port: 1}
	es = append(es, e)
	e = base(7, event.KindCMNotify, "lab-cm-pair", 240, "rxe0", 19)
	e.Notify = &event.CMNotify{Type: event.EvPathMig, Ret: 0, CMID: 0xffff888001, LocalID: 0x1a2b, RemoteID: 0x3c4d,
		CMState: 10, LapState: 1}
	es = append(es, e)
	e = base(8, event.KindMAD, "lab-lap", 250, "rxe0", 0)
	e.MAD = &event.MAD{Dir: event.MADSend, MgmtClass: 7, Method: 3, AttrID: event.CMAttrLAP, TID: 0x500f20000,
		Port: 1, MADQPN: 1, FromUser: true, LocalID: 1, RemoteID: 2}
	es = append(es, e)
	e = base(9, event.KindCMHandler, "kworker/1:0", 28, "rxe1", 0)
	e.Handler = &event.CMHandler{AttrID: event.CMAttrLAP, Ret: -22, LocalID: 1, RemoteID: 2, AltDLID: 5}
	es = append(es, e)
	e = base(10, event.KindQPDestroy, "lab-pair", 200, "rxe0", 17)
	e.Life = &event.QPLife{QPType: event.QPTypeRC, Origin: event.OriginUser}
	es = append(es, e)
	e = base(0, event.KindTruth, "lab-pair", 200, "rxe0", 18)
	e.Boot, e.Time = 1011, t0.Add(11*time.Millisecond)
	e.Truth = &event.Truth{Op: event.TruthRead, Source: "netlink", QPType: event.QPTypeRC, Origin: event.OriginUser,
		State: event.StateRTS, HasState: true, Mig: event.MigRearm, RQPN: 17, CM: true}
	es = append(es, e)
	e = base(0, event.KindTruth, "", 0, "rxe0", 17)
	e.Boot, e.Time = 1012, t0.Add(12*time.Millisecond)
	e.Truth = &event.Truth{Op: event.TruthGone, Source: "netlink"}
	es = append(es, e)
	return es
}

func golden(t *testing.T, name string, got []byte) { testkit.Golden(t, name, got) }

func TestJSONGolden(t *testing.T) {
	var b bytes.Buffer
	w := NewJSONWriter(&b)
	for _, e := range sample() {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	golden(t, "events.jsonl", b.Bytes())
	// Every line is one object with a kind; conditional fields follow the mask.
	for i, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if m["kind"] == nil || m["tid"] == nil {
			t.Errorf("line %d lacks kind or tid: %s", i, line)
		}
	}
	rearm := jsonValue(sample()[3]).(jsonModify)
	if rearm.MigState != "REARM" || rearm.State != "" || rearm.Alt != nil || rearm.DestQPN != nil {
		t.Errorf("rearm fields: %+v", rearm)
	}
	alt := jsonValue(sample()[2]).(jsonModify)
	if alt.Errno != "EINVAL" || alt.Alt == nil || alt.Alt.DGID != "::ffff:192.168.77.2" || *alt.Alt.Timeout != 14 || alt.UHandle != nil {
		t.Errorf("alt-path fields: %+v %+v", alt, alt.Alt)
	}
}

func TestTableGolden(t *testing.T) {
	var b bytes.Buffer
	w := NewTableWriter(&b)
	for _, e := range sample() {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	golden(t, "events.table", b.Bytes())
}

func TestFilter(t *testing.T) {
	es := sample()
	count := func(f Filter) int {
		n := 0
		for _, e := range es {
			if f.Match(e) {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		name                             string
		devices, qpns, pids, comms, kind []string
		want                             int
	}{
		{name: "all", want: 12},
		{name: "device", devices: []string{"rxe1"}, want: 2},
		{name: "qpn list", qpns: []string{"17,0x12"}, want: 8},
		{name: "qpn never matches qpn-less events", qpns: []string{"0"}, want: 0},
		{name: "pid", pids: []string{"200"}, want: 5},
		{name: "comm", comms: []string{"lab-lap", "lab-inject"}, want: 2},
		{name: "kind", kind: []string{"modify", "qp-event"}, want: 4},
		{name: "and", kind: []string{"modify"}, qpns: []string{"17"}, want: 2},
	} {
		f, err := ParseFilter(c.devices, c.qpns, c.pids, c.comms, c.kind)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := count(f); got != c.want {
			t.Errorf("%s: %d events, want %d", c.name, got, c.want)
		}
	}
	for _, bad := range [][]string{{"", "x", "", "", ""}, {"", "", "-1", "", ""}, {"", "", "", "", "modfy"}} {
		if _, err := ParseFilter(split1(bad[0]), split1(bad[1]), split1(bad[2]), split1(bad[3]), split1(bad[4])); err == nil {
			t.Errorf("bad filter %q accepted", bad)
		}
	}
}

func split1(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func TestNames(t *testing.T) {
	if got := strings.Join(AttrNames(event.AttrState|event.AttrAltPath|1<<30), ","); got != "STATE,ALT_PATH,BIT30" {
		t.Errorf("attr names %q", got)
	}
	if Errno(-22) != "EINVAL" || Errno(0) != "" || Errno(-106) != "EISCONN" {
		t.Error("errno names")
	}
	if CMState(10) != "ESTABLISHED" || LapState(3) != "RCVD" || LapState(9) != "LAP_STATE(9)" {
		t.Error("cm state names")
	}
}

func TestRunProbes(t *testing.T) {
	noRDMA := errors.New("ib_core is not loaded")
	if err := RunProbes(false, ProbesDeps{Check: func() error { return noRDMA }, Stdout: io.Discard}); !errors.Is(err, noRDMA) {
		t.Errorf("probes without rdma: %v", err)
	}
	plan := func() ([]event.Hook, error) {
		return []event.Hook{{Name: "ib_modify_qp", Method: event.HookFentry}}, nil
	}
	// -o json (and the older --json): the bare array it always printed,
	// a contract read outside apmwatch
	var out bytes.Buffer
	err := RunProbes(true, ProbesDeps{Plan: plan, Stdout: &out})
	var hooks []event.Hook
	if err != nil || json.Unmarshal(out.Bytes(), &hooks) != nil || len(hooks) != 1 {
		t.Errorf("probes -o json: %v\n%s", err, out.String())
	}
	// no hook planned: [], never null
	out.Reset()
	err = RunProbes(true, ProbesDeps{Plan: func() ([]event.Hook, error) { return nil, nil }, Stdout: &out})
	if err != nil || strings.TrimSpace(out.String()) != "[]" {
		t.Errorf("probes -o json, no hook: %v\n%s", err, out.String())
	}
}

// probes loads what it plans: verified hooks say so; without the privileges
// to load, the plan is printed and called unverified; any other failure
// to load is an error, never a plan passed off as checked.
func TestRunProbesVerifies(t *testing.T) {
	noPriv := errors.New("need root, or CAP_BPF and CAP_PERFMON, to load probes")
	plan := func() ([]event.Hook, error) {
		return []event.Hook{{Name: "ib_modify_qp", Method: event.HookFentry}}, nil
	}
	deps := func(verify func() ([]event.Hook, error), out, errb *bytes.Buffer) ProbesDeps {
		return ProbesDeps{Plan: plan, Verify: verify, Unprivileged: func(err error) bool { return errors.Is(err, noPriv) },
			Stdout: out, Stderr: errb}
	}
	var out, errb bytes.Buffer
	verified := func() ([]event.Hook, error) {
		return []event.Hook{{Name: "ib_modify_qp", Method: event.HookKprobe, Verified: true}}, nil
	}
	if err := RunProbes(false, deps(verified, &out, &errb)); err != nil || !strings.Contains(out.String(), "verified: every hook") ||
		!strings.Contains(out.String(), "kprobe") || errb.Len() != 0 {
		t.Errorf("verified: %v\n%s\n%s", err, out.String(), errb.String())
	}
	out.Reset()
	if err := RunProbes(true, deps(verified, &out, &errb)); err != nil || !strings.Contains(out.String(), `"verified": true`) {
		t.Errorf("verified -o json: %v\n%s", err, out.String())
	}
	out.Reset()
	unpriv := func() ([]event.Hook, error) { return nil, noPriv }
	if err := RunProbes(false, deps(unpriv, &out, &errb)); err != nil || !strings.Contains(errb.String(), "planned, not verified: need root") ||
		strings.Contains(out.String(), "verified:") || !strings.Contains(out.String(), "ib_modify_qp") {
		t.Errorf("unprivileged: %v\n%s\n%s", err, out.String(), errb.String())
	}
	broken := errors.New("reading the embedded probes: bad elf")
	if err := RunProbes(false, deps(func() ([]event.Hook, error) { return nil, broken }, &out, &errb)); !errors.Is(err, broken) {
		t.Errorf("a failed load passed: %v", err)
	}
}

// realisticHooks are hooks as apmwatch probes lists them on a kernel
// without mlx5 and with an --event-hook of a long module and function name.
func realisticHooks() []event.Hook {
	return []event.Hook{
		{Name: "ib_modify_qp", Module: "ib_core", Method: event.HookFentry, Reason: "fentry/fexit", Signal: "qp modify, kernel ULP QPs"},
		{Name: "ib_modify_qp_with_udata", Module: "ib_core", Method: event.HookFentry, Reason: "fentry/fexit", Signal: "qp modify, user QPs"},
		{Name: "__ib_qp_event_handler", Module: "ib_core", Method: event.HookMissing, Reason: "not in kallsyms (inlined, renamed or absent on this kernel)", Signal: "qp async events, every QP (>= 6.11)"},
		{Name: "ib_uverbs_qp_event_handler", Module: "ib_uverbs", Method: event.HookKprobe, Reason: "no BTF for module ib_uverbs: kprobe (no types from external btf)", Signal: "qp async events, user QPs"},
		{Name: "mlx5_ib_qp_event", Module: "mlx5_ib", Method: event.HookMissing, Reason: "module mlx5_ib not loaded", Signal: "qp async events, mlx5 (raw, qpn only)"},
		{Name: "rds_ib_qp_event_handler", Module: "rds_rdma", Method: event.HookSkipped, Reason: "not needed: __ib_qp_event_handler sees every QP event; using the driver, uverbs and ULP handlers instead", Signal: "qp async events, RDS"},
		{Name: "ib_mad:ib_mad_recv_done_handler", Module: "ib_core", Method: event.HookTracepoint, Reason: "raw_tp (no BTF for the tracepoint)", Signal: "CM MADs received"},
		{Name: "vendor_rdma_driver_extension:vendor_qp_async_event_dispatch", Module: "vendor_rdma_driver_extension", Method: event.HookKprobe, Reason: "name also in other, other2: kprobe on vendor_qp_async_event_dispatch", Signal: "qp async events, --event-hook"},
	}
}

// The hook table fits 80 columns; -o wide has every cell whole, and both
// end with the count of hooks by method.
func TestHookTableWidth(t *testing.T) {
	hooks := realisticHooks()
	var b bytes.Buffer
	if err := PrintHooks(&b, hooks); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(hooks)+2 {
		t.Fatalf("%d lines:\n%s", len(lines), b.String())
	}
	for _, l := range lines {
		if w := columns.Width(l); w > columns.Terminal {
			t.Errorf("%d columns: %q", w, l)
		}
	}
	for _, h := range hooks[:3] { // short names stay whole
		if !strings.Contains(b.String(), h.Name+" ") {
			t.Errorf("%s cut:\n%s", h.Name, b.String())
		}
	}
	if !strings.Contains(b.String(), columns.Ellipsis) {
		t.Errorf("nothing cut:\n%s", b.String())
	}
	wantCount := "hooks: 2 fentry, 2 kprobe, 1 tracepoint, 1 skipped, 2 missing"
	if lines[len(lines)-1] != wantCount {
		t.Errorf("last line %q", lines[len(lines)-1])
	}
	b.Reset()
	if err := PrintHooksWide(&b, hooks); err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks {
		if !strings.Contains(b.String(), h.Reason) || !strings.Contains(b.String(), h.Name) || !strings.Contains(b.String(), h.Signal) {
			t.Errorf("wide table lacks %+v", h)
		}
	}
	if !strings.HasSuffix(b.String(), wantCount+"\n") {
		t.Errorf("wide table ends %q", b.String())
	}
}

// trace's summary counts the hooks on one line: the table is apmwatch
// probes' (and trace --dry-run's).
func TestSummaryCountsHooksOnOneLine(t *testing.T) {
	var b bytes.Buffer
	if err := PrintSummary(&b, Counts{}, event.Stats{}, realisticHooks()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "HOOK") || strings.Contains(out, "ib_modify_qp") || strings.Count(out, "\nhooks: ") != 1 ||
		!strings.HasSuffix(out, "hooks: 2 fentry, 2 kprobe, 1 tracepoint, 1 skipped, 2 missing (apmwatch probes lists each)\n") {
		t.Errorf("summary:\n%s", out)
	}
}

// trace's default table fits 80 columns: the fixed columns on one line (a
// long comm cut, never its pid), what the event says wrapped under it;
// -o wide (TableWriter) has one row an event, in full.
func TestLineTableWidth(t *testing.T) {
	var b bytes.Buffer
	w := NewLineWriter(&b)
	es := sample()
	long := *es[1]
	long.Comm, long.Device, long.PID = "a-very-long-process-name-from-a-file", "vendor_rdma_device_with_a_long_name0", 4194304
	for _, e := range append(es, &long) {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFinding(sampleFinding()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if w := columns.Width(l); w > columns.Terminal {
			t.Errorf("%d columns: %q", w, l)
		}
	}
	for _, want := range []string{"a-very-long-pro…:4194304 ", "vendor_rdma…", "[STATE,AV,DEST_QPN] ret=0", "FINDING", "apm-modify-failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	golden(t, "events.lines", b.Bytes())
}

// TestDetailRefusedByUverbs: a modify ib_uverbs refused says so, with the
// alternate address vector's port it compared.
func TestDetailRefusedByUverbs(t *testing.T) {
	e := &event.Event{Kind: event.KindModify, Modify: &event.Modify{Hook: "ib_uverbs_modify_qp",
		AttrMask: event.AttrAltPath, Alt: &event.Path{Port: 2, DLID: 3}, Ret: -22}}
	if d := Detail(e); !strings.Contains(d, "by ib_uverbs (alt av port 0)") {
		t.Errorf("refused by ib_uverbs: %q", d)
	}
	e.Modify.Hook = "ib_modify_qp_with_udata"
	if d := Detail(e); strings.Contains(d, "ib_uverbs") {
		t.Errorf("refused by the verbs layer, named as ib_uverbs: %q", d)
	}
}

// -o wide is plain aligned columns, as kubectl and rdma print them: no
// box, no border, each cell whole, the long text last.
func TestWideIsPlainColumns(t *testing.T) {
	var b bytes.Buffer
	if err := PrintHooksWide(&b, realisticHooks()); err != nil {
		t.Fatal(err)
	}
	w := NewTableWriter(&b)
	for _, e := range sample() {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if strings.ContainsAny(b.String(), "│┌└─┼|+") {
		t.Errorf("wide draws a box:\n%s", b.String())
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.HasPrefix(lines[0], "HOOK ") || !strings.HasSuffix(lines[0], "WHY") {
		t.Errorf("hooks header %q: want WHY, the long text, last", lines[0])
	}
	for _, h := range realisticHooks() {
		if !strings.Contains(b.String(), h.Reason+"\n") {
			t.Errorf("the reason of %s is not whole at the end of its line", h.Name)
		}
	}
}
