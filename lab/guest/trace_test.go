//go:build labguest

// `apmwatch trace --output json` beside the lab
// programs shows every APM step with the right device, qpn, pid and comm,
// on both kernels; QP events come from __ib_qp_event_handler on 6.12 and
// from the fallbacks (ib_uverbs_qp_event_handler, the ULP's handler) on 6.1.
package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// trace is a running `apmwatch trace --output json`.
type trace struct {
	*Proc
	meta   event.Meta
	attach time.Duration // start to ready file
}

func startTrace(t *testing.T, args ...string) *trace {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	start := time.Now()
	if !slices.Contains(args, "--event-hook") {
		args = append(args, labHooks(t)...)
	}
	p := Start(t, "apmwatch", append([]string{"trace", "--output", "json", "--ready-file", ready}, args...)...)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(ready)
		if err == nil {
			tr := &trace{Proc: p, attach: time.Since(start)}
			if err := json.Unmarshal(b, &tr.meta); err != nil {
				t.Fatalf("ready file: %v: %s", err, b)
			}
			return tr
		}
		if time.Now().After(deadline) {
			t.Fatalf("apmwatch trace not ready\n%s", p.Dump())
		}
	}
}

// stop ends the trace and checks its summary: nothing lost.
func (tr *trace) stop(t *testing.T) {
	t.Helper()
	if err := tr.Stop(t); err != nil {
		t.Errorf("apmwatch trace on SIGTERM: %v\n%s", err, tr.Stderr())
	}
	if !strings.Contains(tr.Stderr(), "lost: 0,") || !strings.Contains(tr.Stderr(), "unjoined exits: 0") {
		t.Errorf("trace summary reports losses:\n%s", tr.Stderr())
	}
}

func (tr *trace) method(name string) event.HookMethod {
	for _, h := range tr.meta.Hooks {
		if h.Name == name {
			return h.Method
		}
	}
	return ""
}

// qpEventHooks are the hooks that must report QP events on this kernel:
// for user QPs and for the kernel ULP's QPs (without __ib_qp_event_handler,
// 5.10 and 6.1, through labHooks). From kallsyms, not the version.
func qpEventHooks(t *testing.T) (user, ulp string) {
	if hasQPEventHandler(t) {
		return "__ib_qp_event_handler", "__ib_qp_event_handler"
	}
	return "ib_uverbs_qp_event_handler", "qp_event"
}

func sub(l Line, key string) Line {
	m, _ := l[key].(map[string]any)
	return Line(m)
}

func hasAttr(attr string) func(Line) bool {
	return func(l Line) bool { return strings.Contains(fmt.Sprint(l["attrs"]), attr) }
}

func and(ps ...func(Line) bool) func(Line) bool {
	return func(l Line) bool {
		for _, p := range ps {
			if !p(l) {
				return false
			}
		}
		return true
	}
}

func TestTraceUserQP(t *testing.T) {
	userHook, _ := qpEventHooks(t)
	tr := startTrace(t)
	if m := tr.method(userHook); m != event.HookFentry && m != event.HookKprobe {
		t.Fatalf("%s attached as %q, want fentry or kprobe: %+v", userHook, m, tr.meta.Hooks)
	}
	p, ready := startPair(t, "--behavior", "alt-then-rearm")
	q := QPN(t, ready, "rxe0")
	pid := p.cmd.Process.Pid
	me := Match("kind", "modify", "device", "rxe0", "qpn", q, "pid", pid, "comm", "lab-pair",
		"origin", "user", "hook", "ib_modify_qp_with_udata")
	i := 0
	for _, st := range []string{"INIT", "RTR", "RTS"} {
		var l Line
		l, i = tr.Wait(t, i, evTimeout, and(me, Match("state", st, "ret", 0)))
		if st == "RTR" && (sub(l, "primary").Int("port") != 1 || l.Int("dest_qpn") != QPN(t, ready, "rxe1")) {
			t.Errorf("RTR modify: %v", l)
		}
	}
	tr.Wait(t, i, evTimeout, and(me, Match("mig_state", "REARM", "ret", 0, "attr_mask", event.AttrPathMigState)))

	Inject(t, "rxe0", q, "path_mig", true)
	ev, i := tr.Wait(t, 0, evTimeout, Match("kind", "qp-event", "event", "PATH_MIG", "device", "rxe0", "qpn", q))
	if ev.Str("hook") != userHook || ev.Str("comm") != "lab-inject" || ev.Str("origin") != "user" {
		t.Errorf("PATH_MIG: %v, want hook %s from lab-inject on a user QP", ev, userHook)
	}
	// lab-pair's reaction: the alternate path (rejected on RoCE), then the rearm.
	alt, i := tr.Wait(t, i, evTimeout, and(me, hasAttr("ALT_PATH")))
	a := sub(alt, "alt")
	if alt.Int("ret") != -22 || alt.Str("errno") != "EINVAL" || a.Int("port") != 1 || a.Str("is_global") != "true" || a.Int("dlid") != 0 ||
		!strings.HasPrefix(a.Str("dgid"), "::ffff:") || !a.Has("timeout") || !a.Has("pkey_index") {
		t.Errorf("alternate path attempt: %v, want ret -22 with a decoded RoCE path", alt)
	}
	tr.Wait(t, i, evTimeout, and(me, Match("mig_state", "REARM", "ret", 0)))
	// the load reached the verbs layer: its record is the verbs hook's
	// alone, none from ib_uverbs' command hooks
	if u := Filter(tr.Lines(), and(Match("kind", "modify", "device", "rxe0", "qpn", q),
		func(l Line) bool { return strings.HasPrefix(l.Str("hook"), "ib_uverbs_") })); len(u) != 0 {
		t.Errorf("a modify the verbs layer refused, also recorded as refused by ib_uverbs: %v", u)
	}

	for _, e := range []string{"path_mig_err", "comm_est"} {
		Inject(t, "rxe0", q, e, false)
		name := strings.ToUpper(e)
		ev, _ := tr.Wait(t, 0, evTimeout, Match("kind", "qp-event", "event", name, "device", "rxe0", "qpn", q))
		if ev.Str("hook") != userHook {
			t.Errorf("%s via %s, want %s", name, ev.Str("hook"), userHook)
		}
	}
	if err := p.Stop(t); err != nil {
		t.Errorf("lab-pair: %v", err)
	}
	tr.Wait(t, 0, evTimeout, Match("kind", "qp-destroy", "device", "rxe0", "qpn", q, "pid", pid, "ret", 0))
	// A kernel that inlines ib_create_qp_user (5.10) shows no creation:
	// apmwatch lists the hook missing.
	if hasKsym(t, "ib_create_qp_user") {
		tr.Wait(t, 0, evTimeout, Match("kind", "qp-create", "device", "rxe0", "qpn", q, "pid", pid, "origin", "user"))
	} else if m := tr.method("ib_create_qp_user"); m != event.HookMissing {
		t.Errorf("ib_create_qp_user is not in kallsyms, and the trace attached it as %q", m)
	}
	tr.stop(t)
}

func TestTraceKernelULP(t *testing.T) {
	_, ulpHook := qpEventHooks(t)
	tr := startTrace(t)
	st := MustRun(t, "lab-ulp", "start", "--behavior", "correct")
	t.Cleanup(func() { Run(t, "lab-ulp", "stop") })
	q := int64(-1)
	for _, l := range st {
		if l.Str("dev") == "rxe0" {
			q = l.Int("qpn")
		}
	}
	if q <= 1 {
		t.Fatalf("lab-ulp start: no rxe0 QP in %v", st)
	}
	me := Match("kind", "modify", "device", "rxe0", "qpn", q, "origin", "kernel", "hook", "ib_modify_qp")
	tr.Wait(t, 0, evTimeout, and(me, Match("state", "RTS", "ret", 0)))
	tr.Wait(t, 0, evTimeout, and(me, Match("mig_state", "REARM", "ret", 0)))

	Inject(t, "rxe0", q, "path_mig", true)
	ev, i := tr.Wait(t, 0, evTimeout, Match("kind", "qp-event", "event", "PATH_MIG", "device", "rxe0", "qpn", q))
	if ev.Str("hook") != ulpHook || ev.Str("origin") != "kernel" {
		t.Errorf("ULP PATH_MIG: %v, want hook %s on a kernel QP", ev, ulpHook)
	}
	alt, i := tr.Wait(t, i, evTimeout, and(me, hasAttr("ALT_PATH")))
	if alt.Int("ret") != -22 || sub(alt, "alt").Int("port") != 1 {
		t.Errorf("ULP alternate path: %v, want ret -22 and port 1", alt)
	}
	tr.Wait(t, i, evTimeout, and(me, Match("mig_state", "REARM", "ret", 0)))
	for _, e := range []string{"path_mig_err", "comm_est"} {
		Inject(t, "rxe0", q, e, false)
		ev, _ := tr.Wait(t, 0, evTimeout, Match("kind", "qp-event", "event", strings.ToUpper(e), "device", "rxe0", "qpn", q))
		if ev.Str("hook") != ulpHook {
			t.Errorf("ULP %s via %s, want %s", e, ev.Str("hook"), ulpHook)
		}
	}
	MustRun(t, "lab-ulp", "stop")
	tr.Wait(t, 0, evTimeout, Match("kind", "qp-destroy", "device", "rxe0", "qpn", q, "origin", "kernel", "ret", 0))
	tr.stop(t)
}

func TestTraceCMNotify(t *testing.T) {
	tr := startTrace(t)
	p := Start(t, "lab-cm-pair", "--behavior", "rearm", "--duration", "2m")
	q := QPN(t, p.Ready(t, 2), "rxe0")
	Inject(t, "rxe0", q, "path_mig", true)
	n, _ := p.Wait(t, 0, evTimeout, Match("notify", "PATH_MIG", "qpn", q))
	l, _ := tr.Wait(t, 0, evTimeout, Match("kind", "cm-notify", "event", "PATH_MIG", "pid", p.cmd.Process.Pid))
	if l.Int("ret") != n.Int("ret") || l.Str("device") != "rxe0" || l.Int("qpn") != q || l.Str("comm") != "lab-cm-pair" ||
		l.Str("cm_state") != "ESTABLISHED" {
		t.Errorf("ib_cm_notify: %v, want ret %d (as rdma_notify returned) on rxe0 QP %d", l, n.Int("ret"), q)
	}
	t.Logf("cm-notify: %v", l)
	// The states are the cm_id's at the call: the connection's first
	// migration finds no LAP ever (UNINIT); a successful one leaves IDLE.
	if n.Int("ret") == 0 && l.Str("lap_state") != "UNINIT" {
		t.Errorf("ib_cm_notify: %v, want lap_state UNINIT (as at the call, not IDLE as after it)", l)
	}
	tr.stop(t)
}

func TestTraceLAP(t *testing.T) {
	tr := startTrace(t)
	ls := MustRun(t, "lab-lap", "--dev", "rxe0", "--to", "rxe1")
	if len(ls) == 0 {
		t.Fatal("lab-lap printed nothing")
	}
	tid := ls[0].Int("tid")
	send, _ := tr.Wait(t, 0, evTimeout, Match("kind", "mad", "dir", "send", "attr", "LAP", "device", "rxe0"))
	if send.Str("from_user") != "true" || send.Str("comm") != "lab-lap" || send.Int("mad_qpn") != 1 {
		t.Errorf("LAP sent: %v, want from_user by lab-lap on QP1", send)
	}
	recv, _ := tr.Wait(t, 0, evTimeout, Match("kind", "mad", "dir", "recv", "attr", "LAP", "device", "rxe1"))
	if recv.Str("mad_tid") != send.Str("mad_tid") || recv.Int("local_id") != send.Int("local_id") {
		t.Errorf("LAP received %v does not match sent %v", recv, send)
	}
	if uint32(tid) != uint32(parseHex(t, send.Str("mad_tid"))) {
		t.Errorf("LAP tid %s, lab-lap said %d", send.Str("mad_tid"), tid)
	}
	h, _ := tr.Wait(t, 0, evTimeout, Match("kind", "cm-handler", "attr", "LAP", "device", "rxe1"))
	if h.Int("ret") != -22 || h.Int("local_id") != send.Int("local_id") {
		t.Errorf("cm_lap_handler: %v, want -EINVAL (RoCE) for the LAP sent", h)
	}
	tr.stop(t)
}

func parseHex(t *testing.T, s string) uint64 {
	var v uint64
	if _, err := fmt.Sscanf(s, "0x%x", &v); err != nil {
		t.Fatalf("not hex: %q", s)
	}
	return v
}

// The kprobe and raw tracepoint fallbacks, forced, see the same steps.
func TestTraceKprobeFallback(t *testing.T) {
	userHook, _ := qpEventHooks(t)
	tr := startTrace(t, "--force-kprobe")
	for _, h := range []string{"ib_modify_qp_with_udata", "ib_cm_notify", userHook, "ib_destroy_qp_user"} {
		if m := tr.method(h); m != event.HookKprobe {
			t.Errorf("%s attached as %q, want kprobe", h, m)
		}
	}
	p, ready := startPair(t, "--behavior", "rearm")
	q := QPN(t, ready, "rxe0")
	tr.Wait(t, 0, evTimeout, Match("kind", "modify", "device", "rxe0", "qpn", q, "mig_state", "REARM", "ret", 0,
		"hook", "ib_modify_qp_with_udata"))
	Inject(t, "rxe0", q, "path_mig", true)
	tr.Wait(t, 0, evTimeout, Match("kind", "qp-event", "event", "PATH_MIG", "qpn", q, "hook", userHook))
	MustRun(t, "lab-lap", "--dev", "rxe0", "--to", "rxe1")
	tr.Wait(t, 0, evTimeout, Match("kind", "mad", "dir", "send", "attr", "LAP", "from_user", true))
	p.Stop(t)
	tr.Wait(t, 0, evTimeout, Match("kind", "qp-destroy", "qpn", q, "device", "rxe0"))
	tr.stop(t)
}

// --event-hook attaches a named (struct ib_event *, void *) handler even
// where __ib_qp_event_handler sees every event: the lab module's handler.
func TestTraceEventHookFlag(t *testing.T) {
	tr := startTrace(t, "--event-hook", "qp_event")
	if m := tr.method("qp_event"); m != event.HookFentry && m != event.HookKprobe {
		t.Fatalf("--event-hook qp_event attached as %q", m)
	}
	st := MustRun(t, "lab-ulp", "start")
	t.Cleanup(func() { Run(t, "lab-ulp", "stop") })
	q := int64(-1)
	for _, l := range st {
		if l.Str("dev") == "rxe1" {
			q = l.Int("qpn")
		}
	}
	Inject(t, "rxe1", q, "comm_est", false)
	tr.Wait(t, 0, evTimeout, Match("kind", "qp-event", "event", "COMM_EST", "device", "rxe1", "qpn", q, "hook", "qp_event"))
	tr.stop(t)
}

// Port events: an address added to and removed from the netdev under rxe0
// changes its GID table, which the core dispatches as GID_CHANGE.
func TestTracePortEvent(t *testing.T) {
	tr := startTrace(t, "--kind", "port-event")
	ip := func(args ...string) {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	ip("addr", "add", "192.168.78.1/24", "dev", "veth0")
	defer ip("addr", "del", "192.168.78.1/24", "dev", "veth0")
	l, _ := tr.Wait(t, 0, evTimeout, Match("kind", "port-event", "device", "rxe0", "event", "GID_CHANGE"))
	if l.Int("port") != 1 {
		t.Errorf("GID_CHANGE: %v, want port 1", l)
	}
	tr.stop(t)
}

func TestProbesCommand(t *testing.T) {
	userHook, _ := qpEventHooks(t)
	out, err := exec.Command("apmwatch", "probes", "-o", "json").Output()
	if err != nil {
		t.Fatalf("apmwatch probes: %v", err)
	}
	var hooks []event.Hook
	if err := json.Unmarshal(out, &hooks); err != nil {
		t.Fatalf("apmwatch probes -o json: %v\n%s", err, out)
	}
	got := map[string]event.Hook{}
	for _, h := range hooks {
		got[h.Name] = h
	}
	fn := funcMethod()
	// mlx5_ib is loaded (no device binds): its raw event hook loads, with
	// the CO-RE reads of the QP it belongs to against mlx5_ib's own BTF,
	// wherever __ib_qp_event_handler does not make it unneeded; mlx4_ib
	// is not loaded.
	mlx5 := fn
	if hasQPEventHandler(t) {
		mlx5 = event.HookSkipped
	}
	for name, want := range map[string]event.HookMethod{"ib_modify_qp": fn,
		"ib_modify_qp_with_udata": fn, userHook: fn, "ib_cm_notify": fn,
		"ib_mad:ib_mad_ib_send_mad": event.HookTracepoint, "mlx5_ib_qp_event": mlx5, "mlx4_ib_qp_event": event.HookMissing} {
		if got[name].Method != want {
			t.Errorf("%s: %+v, want %s", name, got[name], want)
		}
	}
	// A function hook this kernel inlines or lacks (5.10: cm_lap_handler,
	// cm_apr_handler, ib_create_qp_user/kernel; 5.10 and 6.1:
	// __ib_qp_event_handler) is listed missing, saying why.
	for _, name := range []string{"__ib_qp_event_handler", "cm_lap_handler", "cm_apr_handler",
		"ib_create_qp_user", "ib_create_qp_kernel", "ib_destroy_qp_user", "ib_cm_notify", "ib_modify_qp_with_udata",
		"ib_uverbs_modify_qp", "ib_uverbs_ex_modify_qp"} {
		if hasKsym(t, name) {
			if got[name].Method == event.HookMissing {
				t.Errorf("%s is in kallsyms, and probes says missing: %+v", name, got[name])
			}
		} else if got[name].Method != event.HookMissing || !strings.Contains(got[name].Reason, "not in kallsyms") {
			t.Errorf("%s is not in kallsyms: %+v, want missing, saying so", name, got[name])
		}
	}
	if got["mlx4_ib_qp_event"].Reason == "" {
		t.Error("a missing hook without a reason")
	}
	if _, ok := got["qp_event"]; ok {
		t.Error("apmwatch probes lists the lab module's handler without --event-hook")
	}
	for _, h := range hooks {
		if !h.Verified {
			t.Errorf("%s: not verified: as root, probes loads what it plans", h.Name)
		}
	}
	// Without privileges it prints the plan and says it is not verified.
	cmd := exec.Command("apmwatch", "probes")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var outb, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &outb, &errb
	if err := cmd.Run(); err != nil || !strings.Contains(errb.String(), "planned, not verified") || !strings.Contains(outb.String(), "ib_modify_qp") {
		t.Errorf("unprivileged probes: %v\n%s\n%s", err, outb.String(), errb.String())
	}
}

// Without privileges: one line saying what is missing, exit 1.
func TestTraceUnprivileged(t *testing.T) {
	cmd := exec.Command("apmwatch", "trace", "--duration", "1s")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var errb strings.Builder
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("unprivileged trace: %v, want exit 1; stderr %q", err, errb.String())
	}
	msg := strings.TrimSpace(errb.String())
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "need root, or CAP_BPF and CAP_PERFMON") {
		t.Errorf("unprivileged trace said %q, want one line naming root or CAP_BPF+CAP_PERFMON", msg)
	}
}

func TestTraceBadInput(t *testing.T) {
	r := Run(t, "apmwatch", "trace", "--qpn", "seventeen")
	if r.Code != 2 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || !strings.Contains(r.Stderr, "--qpn") {
		t.Errorf("bad --qpn: exit %d, stderr %q; want exit 2 and one line", r.Code, r.Stderr)
	}
}

// Records carry a device's index, named by the collector: a device renamed
// while the trace runs is named anew in the events that follow.
func TestTraceDeviceRename(t *testing.T) {
	tr := startTrace(t)
	rename := func(from, to string) error {
		out, err := exec.Command("rdma", "dev", "set", from, "name", to).CombinedOutput()
		if err != nil {
			return fmt.Errorf("rdma dev set %s name %s: %v: %s", from, to, err, out)
		}
		return nil
	}
	if err := rename("rxe1", "rxelab9"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rename("rxelab9", "rxe1"); err != nil {
			t.Error(err)
		}
	})
	p, ready := startPair(t, "--behavior", "rearm", "--dev1", "rxelab9")
	q := QPN(t, ready, "rxelab9")
	tr.Wait(t, 0, evTimeout, Match("kind", "modify", "device", "rxelab9", "qpn", q, "mig_state", "REARM", "ret", 0))
	q0 := QPN(t, ready, "rxe0")
	tr.Wait(t, 0, evTimeout, Match("kind", "modify", "device", "rxe0", "qpn", q0, "mig_state", "REARM", "ret", 0))
	if err := p.Stop(t); err != nil {
		t.Errorf("lab-pair: %v", err)
	}
	tr.stop(t)
}
