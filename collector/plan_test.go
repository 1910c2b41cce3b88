package collector

import (
	"slices"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/event"
)

// fakeKernel is a kernelView from a kallsyms text and a list of BTF functions.
type fakeKernel struct {
	syms    *kallsyms
	btf     map[string]bool // "module:func"
	modules map[string]bool
}

func newFake(t *testing.T, kallsymsText string, btfFuncs ...string) *fakeKernel {
	t.Helper()
	s, err := readKallsyms(strings.NewReader(kallsymsText), nil)
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKernel{syms: s, btf: map[string]bool{}, modules: map[string]bool{"vmlinux": true}}
	for _, f := range btfFuncs {
		k.btf[f] = true
	}
	for _, list := range s.text {
		for _, sym := range list {
			k.modules[sym.module] = true
		}
	}
	return k
}

func (k *fakeKernel) FuncModules(name string) []string {
	var out []string
	for _, s := range k.syms.text[name] {
		out = append(out, s.module)
	}
	return out
}
func (k *fakeKernel) HasBTFFunc(m, n string) bool { return k.btf[m+":"+n] }
func (k *fakeKernel) HasTracepoint(m, n string) (bool, bool) {
	_, ok := k.syms.tps[n]
	return ok, ok && k.btf[m+":btf_trace_"+n]
}
func (k *fakeKernel) ModuleLoaded(m string) bool { return k.modules[m] }

const kallsyms612 = `ffffffffc0001000 T ib_modify_qp	[ib_core]
ffffffffc0001100 T ib_modify_qp_with_udata	[ib_core]
ffffffffc0001200 t __ib_qp_event_handler	[ib_core]
ffffffffc0001300 T ib_dispatch_event_clients	[ib_core]
ffffffffc0001310 T ib_dispatch_event	[ib_core]
ffffffffc0001400 T ib_create_qp_user	[ib_core]
ffffffffc0001500 T ib_create_qp_kernel	[ib_core]
ffffffffc0001600 T ib_destroy_qp_user	[ib_core]
ffffffffc0002000 t ib_uverbs_qp_event_handler	[ib_uverbs]
ffffffffc0003000 T ib_cm_notify	[ib_cm]
ffffffffc0003100 t cm_lap_handler	[ib_cm]
ffffffffc0004000 t qp_event	[apmlab]
ffffffffc0005000 d __tracepoint_ib_mad_ib_send_mad	[ib_core]
ffffffffc0005100 d __tracepoint_ib_mad_recv_done_handler	[ib_core]
ffffffffc0006000 d __tracepoint_ib_umad_write	[ib_umad]
ffffffff81000000 T _stext
`

var btf612 = []string{"ib_core:ib_modify_qp", "ib_core:ib_modify_qp_with_udata", "ib_core:__ib_qp_event_handler",
	"ib_core:ib_dispatch_event_clients", "ib_core:ib_dispatch_event", "ib_core:ib_create_qp_user", "ib_core:ib_create_qp_kernel",
	"ib_core:ib_destroy_qp_user", "ib_uverbs:ib_uverbs_qp_event_handler", "ib_cm:ib_cm_notify", "ib_cm:cm_lap_handler",
	"ib_core:btf_trace_ib_mad_ib_send_mad", "ib_core:btf_trace_ib_mad_recv_done_handler", "ib_umad:btf_trace_ib_umad_write"}

func byName(ts []target) map[string]target {
	m := map[string]target{}
	for _, t := range ts {
		m[t.def.Name] = t
	}
	return m
}

func TestPlan612UsesCoreEventHandler(t *testing.T) {
	got := byName(plan(newFake(t, kallsyms612, btf612...), defaultHooks(), planOptions{}))
	for name, want := range map[string]event.HookMethod{
		"ib_modify_qp": event.HookFentry, "ib_modify_qp_with_udata": event.HookFentry,
		"__ib_qp_event_handler": event.HookFentry, "ib_uverbs_qp_event_handler": event.HookSkipped,
		"mlx5_ib_qp_event": event.HookMissing, "cm_apr_handler": event.HookMissing,
		"ib_cm_notify": event.HookFentry, "cm_lap_handler": event.HookFentry,
		"ib_mad:ib_mad_ib_send_mad": event.HookTracepoint, "ib_umad:ib_umad_write": event.HookTracepoint,
		"ib_destroy_qp_user": event.HookFentry,
	} {
		if got[name].method != want {
			t.Errorf("%s: %s (%s), want %s", name, got[name].method, got[name].reason, want)
		}
	}
	if _, ok := got["qp_event"]; ok {
		t.Error("the lab module's handler is in the default hooks")
	}
	for _, spec := range []string{"qp_event", "apmlab:qp_event"} {
		withFlag := plan(newFake(t, kallsyms612, btf612...), defaultHooks(), planOptions{EventHooks: []string{spec, spec}})
		if n := len(withFlag); n != len(defaultHooks())+1 {
			t.Errorf("--event-hook %s twice: %d hooks, want %d", spec, n, len(defaultHooks())+1)
		}
		if g := byName(withFlag)["qp_event"]; g.method != event.HookKprobe || g.module != "apmlab" {
			t.Errorf("--event-hook %s with __ib_qp_event_handler present: %s %q in %q, want attached in apmlab", spec, g.method, g.reason, g.module)
		}
	}
	// MODULE:FUNC names the module even while it is not loaded: the hook
	// says so, and the audit watches the module for its load.
	k := newFake(t, strings.Replace(kallsyms612, "ffffffffc0004000 t qp_event	[apmlab]\n", "", 1), btf612...)
	if g := byName(plan(k, defaultHooks(), planOptions{EventHooks: []string{"apmlab:qp_event"}}))["qp_event"]; g.method != event.HookMissing ||
		g.reason != "module apmlab not loaded" || g.hook().Module != "apmlab" {
		t.Errorf("--event-hook apmlab:qp_event without apmlab: %s %q %+v", g.method, g.reason, g.hook())
	}
	known := plan(newFake(t, kallsyms612, btf612...), defaultHooks(), planOptions{EventHooks: []string{"ib_uverbs_qp_event_handler"}})
	if n := len(known); n != len(defaultHooks()) {
		t.Errorf("--event-hook of a known handler added a hook: %d, want %d", n, len(defaultHooks()))
	}
	if g := byName(known)["ib_uverbs_qp_event_handler"]; g.method != event.HookFentry {
		t.Errorf("--event-hook ib_uverbs_qp_event_handler with __ib_qp_event_handler present: %s %q, want attached", g.method, g.reason)
	}
	if r := got["mlx5_ib_qp_event"].reason; r != "module mlx5_ib not loaded" {
		t.Errorf("mlx5 reason %q", r)
	}
	if r := got["ib_mad:ib_mad_ib_send_mad"].reason; r != "tp_btf" {
		t.Errorf("tracepoint reason %q", r)
	}
}

func TestPlan61FallsBackPerHook(t *testing.T) {
	k61 := strings.Replace(kallsyms612, "ffffffffc0001200 t __ib_qp_event_handler	[ib_core]\n", "", 1)
	var funcs []string
	for _, f := range btf612 {
		if f != "ib_core:__ib_qp_event_handler" && f != "ib_cm:cm_lap_handler" {
			funcs = append(funcs, f)
		}
	}
	got := byName(plan(newFake(t, k61, funcs...), defaultHooks(), planOptions{EventHooks: []string{"my_handler", "qp_event"}}))
	if g := got["__ib_qp_event_handler"]; g.method != event.HookMissing || !strings.Contains(g.reason, "instead") {
		t.Errorf("primary: %s %q", g.method, g.reason)
	}
	if g := got["ib_uverbs_qp_event_handler"]; g.method != event.HookFentry {
		t.Errorf("uverbs fallback: %s %q", g.method, g.reason)
	}
	// The lab module has no BTF: kprobe.
	if g := got["qp_event"]; g.method != event.HookKprobe || g.reason != "no BTF for the function" {
		t.Errorf("lab handler: %s %q", g.method, g.reason)
	}
	if g := got["cm_lap_handler"]; g.method != event.HookKprobe {
		t.Errorf("no-BTF function: %s %q", g.method, g.reason)
	}
	if g := got["my_handler"]; g.method != event.HookMissing || !strings.Contains(g.reason, "not in kallsyms") {
		t.Errorf("--event-hook: %s %q", g.method, g.reason)
	}
}

func TestPlanForceKprobeAndAmbiguous(t *testing.T) {
	k := strings.Replace(kallsyms612, "ffffffffc0001200 t __ib_qp_event_handler	[ib_core]\n", "", 1) +
		"ffffffffc0007000 t cm_lap_handler	[other]\nffffffffc0007100 t cm_lap_handler	[other2]\n"
	got := byName(plan(newFake(t, k, btf612...), defaultHooks(), planOptions{ForceKprobe: true}))
	if g := got["ib_modify_qp"]; g.method != event.HookKprobe || g.btf {
		t.Errorf("forced: %s btf=%v", g.method, g.btf)
	}
	if g := got["ib_mad:ib_mad_recv_done_handler"]; g.method != event.HookTracepoint || g.btf {
		t.Errorf("forced tracepoint: %s btf=%v %q", g.method, g.btf, g.reason)
	}
	if g := got["cm_lap_handler"]; g.method != event.HookKprobe || g.kprobeSymbol() != "ib_cm:cm_lap_handler" ||
		!strings.Contains(g.reason, "also in other, other2") {
		t.Errorf("ambiguous: %s %q %q", g.method, g.reason, g.kprobeSymbol())
	}
}

func TestKallsymsAddrs(t *testing.T) {
	s, err := readKallsyms(strings.NewReader(kallsyms612), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := s.addrs([]string{"ib_modify_qp", "nope"})
	if len(a) != 1 || a[0xffffffffc0001000] != "ib_modify_qp" {
		t.Errorf("addrs: %v", a)
	}
	if _, err := readKallsyms(strings.NewReader("zz T f\n"), nil); err == nil {
		t.Error("bad address accepted")
	}
}

func TestKallsymsWanted(t *testing.T) {
	text := kallsyms612 + "ffffffffc0009000 T not_wanted\t[ib_core]\n" +
		"ffffffffc0009100 d __tracepoint_other_tp\t[ib_core]\n" +
		"ffffffff81000000 T ib_cm_notify" // a second copy in vmlinux, no newline at the end
	s, err := readKallsyms(strings.NewReader(text), symbolNames(defaultHooks(), []string{"apmlab:qp_event"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.text["not_wanted"]; ok {
		t.Error("unwanted symbol kept")
	}
	if _, ok := s.tps["other_tp"]; ok {
		t.Error("unwanted tracepoint kept")
	}
	if got := s.text["qp_event"]; len(got) != 1 || got[0].module != "apmlab" || got[0].addr != 0xffffffffc0004000 {
		t.Errorf("qp_event: %+v", got)
	}
	if got := s.text["ib_cm_notify"]; len(got) != 2 || got[1].module != "vmlinux" {
		t.Errorf("ib_cm_notify: %+v", got)
	}
	if s.tps["ib_mad_ib_send_mad"] != "ib_core" {
		t.Errorf("tracepoints: %v", s.tps)
	}
	long := strings.Repeat("x", 300*1024) + "\nffffffffc0001000 T ib_modify_qp\t[ib_core]\n"
	if s, err := readKallsyms(strings.NewReader(long), nil); err != nil || len(s.text["ib_modify_qp"]) != 1 {
		t.Errorf("after an over-long line: %v %v", err, s)
	}
}

// --raw-event-hook MODULE:FUNC attaches a function like mlx5_ib_qp_event:
// a fallback, so on a kernel with __ib_qp_event_handler it is not needed,
// and without it it is attached (fentry with the module's BTF).
func TestPlanRawEventHook(t *testing.T) {
	spec := planOptions{RawEventHooks: []string{"ibsim:ibsim_mlx5_qp_event"}}
	k612 := kallsyms612 + "ffffffffc0009000 T ibsim_mlx5_qp_event	[ibsim]\n"
	funcs := append(slices.Clone(btf612), "ibsim:ibsim_mlx5_qp_event")
	if g := byName(plan(newFake(t, k612, funcs...), defaultHooks(), spec))["ibsim_mlx5_qp_event"]; g.method != event.HookSkipped || g.def.Fentry != "fentry_mlx5_qp_event" {
		t.Errorf("with __ib_qp_event_handler: %s %q %+v", g.method, g.reason, g.def)
	}
	k61 := strings.Replace(k612, "ffffffffc0001200 t __ib_qp_event_handler	[ib_core]\n", "", 1)
	funcs = slices.DeleteFunc(funcs, func(f string) bool { return f == "ib_core:__ib_qp_event_handler" })
	g := byName(plan(newFake(t, k61, funcs...), defaultHooks(), spec))["ibsim_mlx5_qp_event"]
	if g.method != event.HookFentry || g.module != "ibsim" {
		t.Errorf("without __ib_qp_event_handler: %s %q in %q", g.method, g.reason, g.module)
	}
	if g := byName(plan(newFake(t, k61, funcs...), defaultHooks(), planOptions{}))["ibsim_mlx5_qp_event"]; g.def.Name != "" {
		t.Errorf("without the flag the function is planned: %+v", g)
	}
}

// The primary QP-event hook planned but failing to attach brings back the
// fallbacks it made unneeded, with their planned method; a primary that
// attached, or one the kernel lacks (planned so from the start), does not.
func TestUnskipWhenPrimaryFails(t *testing.T) {
	targets := plan(newFake(t, kallsyms612, btf612...), defaultHooks(), planOptions{})
	if again := unskip(targets); again != nil {
		t.Fatalf("primary attached: %d fallbacks brought back", len(again))
	}
	for i := range targets {
		if targets[i].def.Role == rolePrimary {
			targets[i].method, targets[i].failed, targets[i].reason = event.HookMissing, true, "fentry failed: x; kprobe failed: y"
		}
	}
	again := unskip(targets)
	got := byName(targets)["ib_uverbs_qp_event_handler"]
	if len(again) == 0 || got.method != event.HookFentry || !strings.Contains(got.reason, "failed to attach") {
		t.Fatalf("primary failed: %d brought back, uverbs handler %s %q, want fentry", len(again), got.method, got.reason)
	}
	if h := got.hook(); h.Carries != carriesQPEvents || h.Failed {
		t.Errorf("uverbs hook %+v", h)
	}
	if unskip(targets) != nil {
		t.Error("unskip brought fallbacks back twice")
	}
	if h := byName(targets)["__ib_qp_event_handler"].hook(); !h.Failed || h.Carries != carriesQPEvents {
		t.Errorf("failed primary %+v", h)
	}
}

// Every uverbs command passes through rdma_lookup_get_uobject (and
// ib_uverbs_write or ib_uverbs_ioctl): no probe sits there. A refused
// modify's QP is found from its handle at the command's exit, and the
// command hooks have no entry program on fentry kernels.
func TestPlanNoHookOnEveryUverbsCommand(t *testing.T) {
	hot := []string{"rdma_lookup_get_uobject", "ib_uverbs_write", "ib_uverbs_ioctl", "ib_uverbs_cmd_verbs"}
	for _, h := range defaultHooks() {
		if slices.Contains(hot, h.Name) {
			t.Errorf("%s is hooked: every uverbs command would pay for it", h.Name)
		}
		if strings.HasPrefix(h.Name, "ib_uverbs_") && strings.HasSuffix(h.Name, "modify_qp") && h.Fentry != "" {
			t.Errorf("%s has an entry program (%s): every modify would pay for it", h.Name, h.Fentry)
		}
	}
}

// Port events: stamped where the driver reports them (ib_dispatch_event,
// which only queues the work that updates the port cache and then calls
// ib_dispatch_event_clients), and GID_CHANGE at the clients, where the
// GID cache dispatches it: both hooks; MLNX_OFED 4.9 has no
// ib_dispatch_event_clients, and ib_dispatch_event is hooked alone there.
func TestPlanPortEventsWhereTheDriverReportsThem(t *testing.T) {
	got := byName(plan(newFake(t, kallsyms612, btf612...), defaultHooks(), planOptions{}))
	if g := got["ib_dispatch_event"]; g.method != event.HookFentry || g.def.Fentry != "fentry_port_event" {
		t.Errorf("ib_dispatch_event %s %q (%s), want fentry_port_event", g.method, g.reason, g.def.Fentry)
	}
	if g := got["ib_dispatch_event_clients"]; g.method != event.HookFentry || g.def.Fentry != "fentry_gid_event" {
		t.Errorf("ib_dispatch_event_clients %s %q (%s), want fentry_gid_event", g.method, g.reason, g.def.Fentry)
	}
	ofed49 := strings.Replace(kallsyms612, "ffffffffc0001300 T ib_dispatch_event_clients	[ib_core]\n", "", 1)
	got = byName(plan(newFake(t, ofed49), defaultHooks(), planOptions{}))
	if g := got["ib_dispatch_event"]; g.method != event.HookKprobe {
		t.Errorf("without ib_dispatch_event_clients: ib_dispatch_event %s %q, want attached (kprobe: no BTF)", g.method, g.reason)
	}
	if g := got["ib_dispatch_event_clients"]; g.method != event.HookMissing {
		t.Errorf("without it: ib_dispatch_event_clients %s", g.method)
	}
}

// XRC target QPs: on a kernel with __ib_qp_event_handler their events go
// through __ib_shared_qp_event_handler, hooked beside it; below 6.11 the
// handlers it calls are the fallbacks', and it is not needed.
func TestPlanXRCTargetEvents(t *testing.T) {
	shared := "ffffffffc0001210 t __ib_shared_qp_event_handler	[ib_core]\n"
	got := byName(plan(newFake(t, kallsyms612+shared, append(btf612, "ib_core:__ib_shared_qp_event_handler")...), defaultHooks(), planOptions{}))
	if g := got["__ib_shared_qp_event_handler"]; g.method != event.HookFentry {
		t.Errorf("6.12: __ib_shared_qp_event_handler %s %q, want attached beside __ib_qp_event_handler", g.method, g.reason)
	}
	k61 := strings.Replace(kallsyms612, "ffffffffc0001200 t __ib_qp_event_handler	[ib_core]\n", "", 1) + shared
	got = byName(plan(newFake(t, k61, "ib_core:__ib_shared_qp_event_handler"), defaultHooks(), planOptions{}))
	if g := got["__ib_shared_qp_event_handler"]; g.method != event.HookSkipped {
		t.Errorf("6.1: __ib_shared_qp_event_handler %s %q, want skipped", g.method, g.reason)
	}
	if g := got["ib_uverbs_qp_event_handler"]; g.method == event.HookSkipped || g.method == event.HookMissing {
		t.Errorf("6.1: ib_uverbs_qp_event_handler %s", g.method)
	}
}
