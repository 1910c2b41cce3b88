//go:build labguest

// The actuator on a real kernel: apmwatch borrows lab-pair's uverbs file and
// changes its QP; lab-pair's own ibv_query_qp (SIGUSR1) is the witness.
package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/actuator"
	"golang.org/x/sys/unix"
)

// migratedPair starts lab-pair --behavior never-rearm and migrates its rxe0
// QP (PATH_MIG with --migrate): the QP is left MIGRATED, nobody rearms.
func migratedPair(t *testing.T) (p *Proc, pid int, qpn int64) {
	t.Helper()
	p, ready := startPair(t, "--behavior", "never-rearm")
	qpn = QPN(t, ready, "rxe0")
	pid = int(ready[0].Int("pid"))
	Inject(t, "rxe0", qpn, "path_mig", true)
	st, _ := p.Wait(t, 0, evTimeout, Match("query", "after_event", "dev", "rxe0", "qpn", qpn))
	if st.Str("path_mig_state") != "MIGRATED" {
		t.Fatalf("after the injected migration the owner reads %v, want MIGRATED", st)
	}
	return p, pid, qpn
}

// ownerView asks lab-pair (SIGUSR1) for its own ibv_query_qp of the QP.
func ownerView(t *testing.T, p *Proc, pid int, qpn int64) string {
	t.Helper()
	from := len(p.Lines())
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	l, _ := p.Wait(t, from, evTimeout, Match("query", "on_signal", "dev", "rxe0", "qpn", qpn))
	return l.Str("path_mig_state")
}

func actuate(t *testing.T, op string, pid int, qpn int64, extra ...string) Result {
	t.Helper()
	args := append([]string{"actuate", op, "--pid", strconv.Itoa(pid), "--qpn", strconv.FormatInt(qpn, 10),
		"--device", "rxe0", "-o", "json"}, extra...)
	return Run(t, "apmwatch", args...)
}

func TestActuatorRearmThroughBorrowedFile(t *testing.T) {
	p, pid, qpn := migratedPair(t)

	dry := actuate(t, "rearm", pid, qpn, "--dry-run")
	if dry.Code != 0 || len(dry.Lines) != 1 {
		t.Fatalf("dry run: exit %d, %v, stderr %s", dry.Code, dry.Lines, dry.Stderr)
	}
	if !strings.Contains(dry.Lines[0].String(), `"sent":false`) || dry.Lines[0].Has("after") {
		t.Errorf("dry run must show the command unsent and no after state: %v", dry.Lines[0])
	}
	if got := ownerView(t, p, pid, qpn); got != "MIGRATED" {
		t.Fatalf("after --dry-run the owner reads %s, want MIGRATED (nothing changed)", got)
	}

	r := actuate(t, "rearm", pid, qpn)
	if r.Code != 0 {
		t.Fatalf("rearm: exit %d: %s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Lines[0].String(), `"path_mig_state: MIGRATED -\u003e REARM"`) &&
		!strings.Contains(r.Lines[0].String(), `path_mig_state: MIGRATED -> REARM`) {
		t.Errorf("rearm result shows no MIGRATED -> REARM change: %v", r.Lines[0])
	}
	for _, step := range []string{"resolve:", "check:", "send:", "verify:"} {
		if !strings.Contains(r.Stderr, step) {
			t.Errorf("action log lacks %q:\n%s", step, r.Stderr)
		}
	}
	if got := ownerView(t, p, pid, qpn); got != "REARM" {
		t.Fatalf("after actuate rearm the owner reads %s, want REARM", got)
	}

	// A second rearm finds the QP in the wrong state and sends nothing.
	again := actuate(t, "rearm", pid, qpn)
	if again.Code != 1 || !strings.Contains(again.Stderr, "wrong state") || strings.Contains(again.Stderr, "send:") {
		t.Errorf("rearm of a REARM qp: exit %d, stderr %s", again.Code, again.Stderr)
	}
}

func TestActuatorAltPathRefusedOnRoCE(t *testing.T) {
	p, pid, qpn := migratedPair(t)
	r := actuate(t, "load-alt", pid, qpn, "--alt-port", "1", "--alt-dgid", "::ffff:192.168.77.2", "--alt-sgid-index", "1")
	if r.Code != 1 || !strings.Contains(r.Stderr, "APM is InfiniBand-only") || !strings.Contains(r.Stderr, "EINVAL") {
		t.Errorf("load-alt on rxe: exit %d, stderr %s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "send: MODIFY_QP alt_path") {
		t.Errorf("the kernel, not a guess, must refuse it: no send logged:\n%s", r.Stderr)
	}
	if got := ownerView(t, p, pid, qpn); got != "MIGRATED" {
		t.Errorf("after the refused load the owner reads %s, want MIGRATED", got)
	}
	// rearm with a new alternate stops at the refused load: no rearm.
	r = actuate(t, "rearm", pid, qpn, "--alt-port", "1", "--alt-dgid", "::ffff:192.168.77.2", "--alt-sgid-index", "1")
	if r.Code != 1 || !strings.Contains(r.Stderr, "InfiniBand-only") || strings.Contains(r.Stderr, "MODIFY_QP rearm") {
		t.Errorf("rearm with alternate on rxe: exit %d, stderr %s", r.Code, r.Stderr)
	}
	if got := ownerView(t, p, pid, qpn); got != "MIGRATED" {
		t.Errorf("after the refused rearm the owner reads %s, want MIGRATED", got)
	}
}

// The owner destroys the QP after the actuator decided (resolved and
// checked) and before it sends: a clear error, no crash.
func TestActuatorQPDestroyedBeforeAction(t *testing.T) {
	p, pid, qpn := migratedPair(t)
	a := actuator.New(nil)
	a.BeforeSend = func(actuator.Target) {
		from := len(p.Lines())
		if err := syscall.Kill(pid, syscall.SIGUSR2); err != nil {
			t.Fatal(err)
		}
		p.Wait(t, from, evTimeout, Match("destroyed", true, "dev", "rxe0", "qpn", qpn))
	}
	_, err := a.Do(context.Background(), actuator.Request{Op: actuator.OpRearm, PID: pid, QPN: uint32(qpn), Device: "rxe0"})
	if !errors.Is(err, actuator.ErrGone) || !strings.Contains(err.Error(), "no longer exists") {
		t.Fatalf("rearm of a destroyed qp: %v, want qp gone", err)
	}
	t.Logf("error line: %v", err)
	// And from the CLI, once netlink no longer lists it.
	r := actuate(t, "rearm", pid, qpn)
	if r.Code != 1 || !strings.Contains(r.Stderr, "qp not found") {
		t.Errorf("rearm after destroy: exit %d, stderr %s", r.Code, r.Stderr)
	}
}

func TestActuatorWithoutPtraceAccess(t *testing.T) {
	p, pid, qpn := migratedPair(t)
	args := []string{"actuate", "rearm", "--pid", strconv.Itoa(pid), "--qpn", strconv.FormatInt(qpn, 10), "--device", "rxe0"}

	// Root without CAP_SYS_PTRACE: drop it from the bounding set of one
	// locked thread and start apmwatch from there (its permitted set is
	// then computed without it).
	out, code := runWithoutPtraceCap(t, args...)
	if code != 1 || !strings.Contains(out, "no permission") || !strings.Contains(out, "lacks CAP_SYS_PTRACE") {
		t.Errorf("without CAP_SYS_PTRACE: exit %d, output %s", code, out)
	}

	// Another uid (nobody): no ptrace access either.
	cmd := exec.Command("apmwatch", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "no permission") || !strings.Contains(string(b), "CAP_SYS_PTRACE") {
		t.Errorf("as uid 65534: %v, output %s", err, b)
	}
	if got := ownerView(t, p, pid, qpn); got != "MIGRATED" {
		t.Errorf("after refused attempts the owner reads %s, want MIGRATED", got)
	}
}

func runWithoutPtraceCap(t *testing.T, args ...string) (string, int) {
	t.Helper()
	type res struct {
		out  string
		code int
		err  error
	}
	ch := make(chan res)
	go func() {
		// Never unlocked: the thread with the reduced bounding set exits
		// with this goroutine.
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_PTRACE, 0, 0, 0); err != nil {
			ch <- res{err: fmt.Errorf("PR_CAPBSET_DROP: %w", err)}
			return
		}
		b, err := exec.Command("apmwatch", args...).CombinedOutput()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			ch <- res{err: err}
			return
		}
		ch <- res{out: string(b), code: code}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.out, r.code
}

// The cost of the actuator's commands on rxe, for docs/performance.md:
// raw QUERY_QP and MODIFY_QP (rearm) ioctls on the borrowed file, and a
// whole `actuate query` (netlink, /proc, pidfd_getfd, driver id probe,
// INFO_HANDLES, queries).
func TestActuatorCost(t *testing.T) {
	_, pid, qpn := migratedPair(t)
	a := actuator.New(nil)
	b, tg, err := a.Open(pid, "rxe0", uint32(qpn))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 2000
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := b.Query(tg.Handle); err != nil {
			t.Fatal(err)
		}
	}
	q := time.Since(start) / n
	start = time.Now()
	for i := 0; i < n; i++ {
		if err := b.Modify(&actuator.Modify{Handle: tg.Handle, AttrMask: 1 << 18, PathMigState: 1}); err != nil {
			t.Fatal(err)
		}
	}
	m := time.Since(start) / n
	const k = 50
	start = time.Now()
	for i := 0; i < k; i++ {
		if _, err := a.Do(context.Background(), actuator.Request{Op: actuator.OpQuery, PID: pid, QPN: uint32(qpn), Device: "rxe0"}); err != nil {
			t.Fatal(err)
		}
	}
	d := time.Since(start) / k
	t.Logf("cost: QUERY_QP ioctl %v, MODIFY_QP rearm ioctl %v, whole actuate query (resolve+borrow+check) %v", q, m, d)
}

// Kernel ULP QPs are listed as such and never tried.
func TestActuatorKernelQPNotTried(t *testing.T) {
	MustRun(t, "lab-ulp", "start")
	t.Cleanup(func() { Run(t, "lab-ulp", "stop") })
	rows := qpListDoc(t, "--device", "rxe0")
	var qpn int64 = -1
	for _, r := range Filter(rows, Match("kernel", true)) {
		qpn = r.Int("qpn")
	}
	if qpn < 0 {
		t.Fatalf("qp list shows no kernel QP on rxe0: %v", rows)
	}
	r := Run(t, "apmwatch", "actuate", "rearm", "--pid", "1", "--qpn", strconv.FormatInt(qpn, 10), "--device", "rxe0")
	if r.Code != 1 || !strings.Contains(r.Stderr, "kernel qp:") || strings.Contains(r.Stderr, "resolve:") {
		t.Errorf("actuate on a kernel qp: exit %d, stderr %s", r.Code, r.Stderr)
	}
}

// qpListDoc runs `apmwatch qp list -o json` and returns its document's
// rows (one document: {"schema":1,"qps":[...]}).
func qpListDoc(t *testing.T, args ...string) []Line {
	t.Helper()
	out := MustRun(t, "apmwatch", append([]string{"qp", "list", "-o", "json"}, args...)...)
	if len(out) != 1 || out[0].Int("schema") != 1 {
		t.Fatalf("qp list -o json: want one document of schema 1, got %v", out)
	}
	raw, ok := out[0]["qps"].([]any)
	if !ok {
		t.Fatalf("qp list -o json: no qps list: %v", out[0])
	}
	var rows []Line
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			t.Fatalf("qp list -o json: a row that is no object: %v", r)
		}
		rows = append(rows, Line(m))
	}
	return rows
}

// `qp list -o json` says what `rdma -j resource show qp` says of every
// RC/UC QP, under the names docs/actuator.md maps: ifname -> device, lqpn
// -> qpn, rqpn, type, state, path-mig-state -> path_mig_state, pid, port.
func TestQPListMapsToRdmaTool(t *testing.T) {
	MustRun(t, "lab-ulp", "start")
	t.Cleanup(func() { Run(t, "lab-ulp", "stop") })
	ours := map[string]Line{}
	for _, r := range qpListDoc(t, "--no-handles") {
		ours[fmt.Sprintf("%s/%d", r.Str("device"), r.Int("qpn"))] = r
	}
	out, err := exec.Command("rdma", "-j", "resource", "show", "qp").Output()
	if err != nil {
		t.Fatalf("rdma -j resource show qp: %v", err)
	}
	var theirs []map[string]any
	if err := json.Unmarshal(out, &theirs); err != nil {
		t.Fatalf("rdma -j resource show qp: %v\n%s", err, out)
	}
	matched := 0
	for _, m := range theirs {
		r := Line(m)
		if typ := r.Str("type"); typ != "RC" && typ != "UC" {
			continue
		}
		key := fmt.Sprintf("%s/%d", r.Str("ifname"), r.Int("lqpn"))
		o, ok := ours[key]
		if !ok {
			t.Errorf("rdma lists %s, qp list does not: %v", key, r)
			continue
		}
		matched++
		for _, f := range [][2]string{{"type", "type"}, {"state", "state"}, {"path-mig-state", "path_mig_state"}} {
			if r.Str(f[0]) != o.Str(f[1]) {
				t.Errorf("%s: rdma %s %q, qp list %s %q", key, f[0], r.Str(f[0]), f[1], o.Str(f[1]))
			}
		}
		for _, f := range [][2]string{{"rqpn", "rqpn"}, {"pid", "pid"}, {"port", "port"}} {
			if r.Int(f[0]) != o.Int(f[1]) {
				t.Errorf("%s: rdma %s %d, qp list %s %d", key, f[0], r.Int(f[0]), f[1], o.Int(f[1]))
			}
		}
	}
	if matched == 0 {
		t.Fatalf("no RC/UC QP in rdma's list to compare (lab-ulp runs): %s", out)
	}
	t.Logf("%d RC/UC QPs agree with rdma -j resource show qp", matched)
}
