//go:build labguest

// The APM model on real kernel events: `apmwatch record` captures a lab
// scenario, the recording is replayed into apm.Model together with rdma
// netlink ground truth (rdmanl), and the findings for the QP the scenario
// is about are checked.
package guest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
	"github.com/apmwatch/apmwatch/recording"
)

// modelRun records a scenario and keeps the ground-truth snapshots taken
// during it.
type modelRun struct {
	file  string
	rec   *exec.Cmd
	out   bytes.Buffer
	snaps []rdmanl.Snapshot
}

func startModelRun(t *testing.T) *modelRun {
	t.Helper()
	dir := t.TempDir()
	r := &modelRun{file: filepath.Join(dir, "run.rec")}
	ready := filepath.Join(dir, "ready")
	r.rec = exec.Command("apmwatch", append([]string{"record", "-w", r.file, "--ready-file", ready}, labHooks(t)...)...)
	r.rec.Stdout, r.rec.Stderr = &r.out, &r.out
	if err := r.rec.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.rec.Process.Kill() })
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("apmwatch record not ready: %s", r.out.String())
		}
	}
}

// stop ends the recorder with SIGTERM and waits (a loaded TCG guest can
// take a while to flush).
func (r *modelRun) stop(t *testing.T) {
	t.Helper()
	_ = r.rec.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- r.rec.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("apmwatch record: %v: %s", err, r.out.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("apmwatch record did not stop on SIGTERM: %s", r.out.String())
	}
}

// truth takes one rdma netlink snapshot.
func (r *modelRun) truth(t *testing.T) {
	t.Helper()
	s, err := rdmanl.Read()
	if err != nil {
		t.Fatal(err)
	}
	r.snaps = append(r.snaps, s)
}

// findings stops the recorder, replays events and snapshots in Boot order
// into a model with default thresholds, judges every deadline, and returns
// the findings about dev/qpn (all generations).
func (r *modelRun) findings(t *testing.T, dev string, qpn int64) []apm.Finding {
	t.Helper()
	r.stop(t)
	rd, err := recording.Open(r.file)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var evs []*event.Event
	for {
		ev, err := rd.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	var all []apm.Finding
	m, err := apm.New(apm.DefaultConfig(), func(f apm.Finding) { all = append(all, f) })
	if err != nil {
		t.Fatal(err)
	}
	feeder := rdmanl.NewFeeder()
	feed := func(s rdmanl.Snapshot) {
		for _, e := range feeder.Events(s) {
			m.Handle(e)
		}
	}
	sort.SliceStable(r.snaps, func(i, j int) bool { return r.snaps[i].Boot < r.snaps[j].Boot })
	var last uint64
	si := 0
	for _, ev := range evs {
		for si < len(r.snaps) && r.snaps[si].Boot <= ev.Boot {
			feed(r.snaps[si])
			si++
		}
		m.Handle(ev)
		last = max(last, ev.Boot)
	}
	for ; si < len(r.snaps); si++ {
		feed(r.snaps[si])
		last = max(last, r.snaps[si].Boot)
	}
	m.Finish(last + uint64(time.Minute))
	t.Logf("%d events, stats %+v", len(evs), m.Stats())
	var out []apm.Finding
	for _, f := range all {
		t.Logf("  %s (evidence %v)", f.String(), f.Evidence)
		if f.QP.Device == dev && int64(f.QP.QPN) == qpn {
			out = append(out, f)
		}
	}
	return out
}

func kinds(fs []apm.Finding) []string {
	var out []string
	for _, f := range fs {
		k := string(f.Kind)
		if f.Resolved {
			k += "(resolved)"
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func wantKinds(t *testing.T, fs []apm.Finding, want ...apm.Kind) {
	t.Helper()
	var w []string
	for _, k := range want {
		w = append(w, string(k))
	}
	slices.Sort(w)
	if got := kinds(fs); !slices.Equal(got, w) {
		t.Errorf("findings %v, want %v", got, w)
	}
}

// pairScenario runs lab-pair with a behaviour, injects one event on rxe0's
// QP and waits for lab-pair's reaction.
func pairScenario(t *testing.T, behavior, ev string, migrate bool) (*modelRun, int64) {
	t.Helper()
	r := startModelRun(t)
	p, ready := startPair(t, "--behavior", behavior)
	q := QPN(t, ready, "rxe0")
	Inject(t, "rxe0", q, ev, migrate)
	_, i := p.Wait(t, 0, evTimeout, Match("dev", "rxe0", "qpn", q, "event_num", map[string]int{"path_mig": 6, "path_mig_err": 7}[ev]))
	p.Wait(t, i, evTimeout, Match("query", "after_event", "qpn", q))
	time.Sleep(300 * time.Millisecond) // the reaction, if any
	r.truth(t)
	time.Sleep(2500 * time.Millisecond) // past the 2 s deadlines
	p.Stop(t)
	return r, q
}

// never-rearm and an injected migration: exactly one missed-rearm.
func TestModelNeverRearm(t *testing.T) {
	r, q := pairScenario(t, "never-rearm", "path_mig", true)
	wantKinds(t, r.findings(t, "rxe0", q), apm.MissedRearm)
}

// rearm at once after the migration: no missed-rearm. On rxe no alternate
// can be loaded, so the rearm is one without a new alternate:
// `rearm-no-alt`, and `rearm`, its old name the RoCE programs still take
// (with a warning), do the same modifies and give the same finding.
func TestModelRearm(t *testing.T) {
	for _, b := range []string{"rearm", "rearm-no-alt"} {
		t.Run(b, func(t *testing.T) {
			r, q := pairScenario(t, b, "path_mig", true)
			wantKinds(t, r.findings(t, "rxe0", q), apm.RearmWithoutAlt)
		})
	}
}

// alt-then-rearm on RoCE: the alternate load is refused with EINVAL, the
// rearm goes ahead: apm-modify-failed (and a rearm without a new
// alternate), no false missed-rearm.
func TestModelAltThenRearm(t *testing.T) {
	r, q := pairScenario(t, "alt-then-rearm", "path_mig", true)
	fs := r.findings(t, "rxe0", q)
	wantKinds(t, fs, apm.APMModifyFailed, apm.RearmWithoutAlt)
	for _, f := range fs {
		if f.Kind == apm.APMModifyFailed && f.Errno != 22 {
			t.Errorf("apm-modify-failed errno %d, want 22 (EINVAL, RoCE)", f.Errno)
		}
	}
}

// PATH_MIG without the HCA's move (the event arrives, nothing migrated). Ground truth still
// reads REARM: mig-state-mismatch (and, as nobody rearms, missed-rearm).
func TestModelMismatch(t *testing.T) {
	r, q := pairScenario(t, "never-rearm", "path_mig", false)
	wantKinds(t, r.findings(t, "rxe0", q), apm.MigStateMismatch, apm.MissedRearm)
}

// PATH_MIG_ERR: migration-error.
func TestModelMigrationError(t *testing.T) {
	r, q := pairScenario(t, "never-rearm", "path_mig_err", false)
	wantKinds(t, r.findings(t, "rxe0", q), apm.MigrationError)
}

// Four quick migrations, each rearmed. The rxe lab emulates a migration
// as software forcing one (a modify to MIGRATED, then PATH_MIG), and
// software-forced migrations (APM self-tests) are never flapping: no
// flapping finding, only the rearms without a new alternate that rxe
// forces. Hardware migrations that flap are TestIBFindingsFlapping's.
func TestModelFlapping(t *testing.T) {
	r := startModelRun(t)
	q := migrateRearmed(t, 4)
	fs := r.findings(t, "rxe0", q)
	n := 0
	for _, f := range fs {
		switch f.Kind {
		case apm.RearmWithoutAlt:
			n++
		default:
			t.Errorf("unexpected %s", f.String())
		}
	}
	if n != 4 {
		t.Errorf("%d rearm-without-new-alternate findings, want 4 (one a migration): %v", n, kinds(fs))
	}
}

// A kernel ULP that never rearms: missed-rearm for a kernel QP.
func TestModelKernelULPNoRearm(t *testing.T) {
	r := startModelRun(t)
	ls := MustRun(t, "lab-ulp", "start", "--behavior", "no-rearm")
	t.Cleanup(func() { Run(t, "lab-ulp", "stop") })
	q := QPN(t, Filter(ls, Match("kernel", true)), "rxe0")
	Inject(t, "rxe0", q, "path_mig", true)
	time.Sleep(3 * time.Second)
	r.truth(t)
	Run(t, "lab-ulp", "stop")
	wantKinds(t, r.findings(t, "rxe0", q), apm.MissedRearm)
}

// cmScenario runs lab-cm-pair (rdma_cm, rearms after PATH_MIG), injects a
// migration on the client's QP, and takes a ground-truth snapshot whose
// cm_id table marks the QP CM-managed.
func cmScenario(t *testing.T, args ...string) (*modelRun, int64) {
	t.Helper()
	r := startModelRun(t)
	p := Start(t, "lab-cm-pair", append([]string{"--behavior", "rearm-no-alt", "--duration", "2m"}, args...)...)
	q := QPN(t, p.Ready(t, 2), "rxe0")
	r.truth(t)
	Inject(t, "rxe0", q, "path_mig", true)
	p.Wait(t, 0, evTimeout, Match("query", "after_react", "qpn", q))
	time.Sleep(2500 * time.Millisecond)
	p.Stop(t)
	return r, q
}

// rdma_cm QP whose owner calls rdma_notify(PATH_MIG): the CM is told, no
// cm-not-notified.
func TestModelCMNotified(t *testing.T) {
	r, q := cmScenario(t)
	wantKinds(t, r.findings(t, "rxe0", q), apm.RearmWithoutAlt)
}

// The same owner without rdma_notify: cm-not-notified (the model knows the
// QP is CM-managed from rdma netlink's cm_id table).
func TestModelCMNotNotified(t *testing.T) {
	r, q := cmScenario(t, "--no-notify")
	wantKinds(t, r.findings(t, "rxe0", q), apm.RearmWithoutAlt, apm.CMNotNotified)
}
