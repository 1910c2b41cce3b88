package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/internal/testkit"
	"github.com/apmwatch/apmwatch/rdmanl"
	"github.com/apmwatch/apmwatch/recording"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// harness runs the daemon on a fake source with a clock the test moves.
type harness struct {
	t      *testing.T
	dir    string
	cfg    Config
	src    *fakeSource
	boot   atomic.Uint64
	qps    atomic.Pointer[[]rdmanl.QP] // what rdma netlink lists (nil: nothing)
	d      chan *daemon
	errc   chan error
	cancel context.CancelFunc
	hup    chan struct{}
	stderr *syncBuffer
	stdout *syncBuffer
}

func newHarness(t *testing.T, edit func(*Config)) *harness {
	t.Helper()
	return newHarnessWith(t, edit, 20*time.Millisecond, nil)
}

// newHarnessWith is newHarness with the loop's tick and a last word on the
// daemon's connections.
func newHarnessWith(t *testing.T, edit func(*Config), tick time.Duration, deps func(*harness, *Deps)) *harness {
	t.Helper()
	return newHarnessIn(t, t.TempDir(), edit, tick, deps)
}

// newHarnessIn is newHarnessWith on the files of dir (a daemon started
// again on its predecessor's finding log and flight recorder).
func newHarnessIn(t *testing.T, dir string, edit func(*Config), tick time.Duration, deps func(*harness, *Deps)) *harness {
	t.Helper()
	oldTick := tickEvery
	tickEvery = tick
	t.Cleanup(func() { tickEvery, started = oldTick, nil })
	h := &harness{t: t, dir: dir, src: newFakeSource("hostA"), d: make(chan *daemon, 1), errc: make(chan error, 1),
		hup: make(chan struct{}, 1), stderr: &syncBuffer{}, stdout: &syncBuffer{}}
	// The host's clock starts where apmtest's stories start: a clock behind
	// the events by more than the reorder window would be a new boot.
	h.boot.Store(uint64(time.Second))
	h.cfg = DefaultConfig()
	h.cfg.Findings = filepath.Join(dir, "findings.jsonl")
	h.cfg.MetricsAddr = ""
	h.cfg.RecorderDir = filepath.Join(dir, "rec")
	h.cfg.BundleAfter = 0
	h.cfg.ReconcileInterval = 0
	h.cfg.ModuleCheck = 0
	if edit != nil {
		edit(&h.cfg)
	}
	started = func(d *daemon) { h.d <- d }
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	dp := Deps{
		Open: func() (event.Source, error) { return h.src, nil },
		Snapshot: func() (rdmanl.Snapshot, error) {
			snap := rdmanl.Snapshot{Boot: h.boot.Load()}
			if qps := h.qps.Load(); qps != nil {
				snap.QPs = *qps
			}
			return snap, nil
		},
		Boot:   h.boot.Load,
		Stderr: h.stderr,
		Stdout: h.stdout,
		Reopen: h.hup,
	}
	if deps != nil {
		deps(h, &dp)
	}
	go func() { h.errc <- Run(ctx, h.cfg, dp) }()
	return h
}

func (h *harness) daemon() *daemon {
	select {
	case d := <-h.d:
		h.d <- d
		return d
	case err := <-h.errc:
		h.t.Fatalf("Run returned at start: %v", err)
	case <-time.After(5 * time.Second):
		h.t.Fatal("daemon did not start")
	}
	return nil
}

func (h *harness) feed(steps []apmtest.Step) {
	for _, s := range steps {
		if s.Ev != nil {
			h.src.ch <- s.Ev
		}
	}
}

// stop cancels the daemon and waits for Run to return nil.
func (h *harness) stop() {
	h.cancel()
	select {
	case err := <-h.errc:
		if err != nil {
			h.t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		h.t.Fatal("Run did not return after cancel")
	}
}

// lines waits until the finding log has n lines and returns them.
func (h *harness) lines(n int) []lineJSON {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ls := readLines(h.t, h.cfg.Findings)
		if len(ls) >= n || time.Now().After(deadline) {
			if len(ls) != n {
				h.t.Fatalf("want %d finding lines, got %d: %+v\nlog:\n%s", n, len(ls), ls, h.stderr.String())
			}
			return ls
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readLines(t *testing.T, path string) []lineJSON {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []lineJSON
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l lineJSON
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("bad finding line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// missedRearm is an armed RC QP on rxe0 that migrates and is not rearmed.
func missedRearm(b *apmtest.Builder) {
	alt := apmtest.PathB
	b.Connect(17, apmtest.PathA, &alt)
	b.After(10 * time.Millisecond)
	b.ForceMigrate(17)
	b.PathMig(17)
}

// feedMissedRearm feeds the daemon a missed rearm (missedRearm) and moves
// its clock past the deadline; it returns the builder to go on from.
func (h *harness) feedMissedRearm() *apmtest.Builder {
	b := apmtest.New()
	b.Device = "rxe0"
	missedRearm(b)
	h.feed(b.Steps)
	h.boot.Store(b.Now() + uint64(3*time.Second))
	return b
}

func TestRunMissedRearmEndToEnd(t *testing.T) {
	h := newHarness(t, nil)
	d := h.daemon()
	b := apmtest.New()
	b.Device = "rxe0"
	missedRearm(b)
	h.boot.Store(b.Now())
	h.feed(b.Steps)

	// Before the deadline: nothing.
	time.Sleep(100 * time.Millisecond)
	if ls := readLines(t, h.cfg.Findings); len(ls) != 0 {
		t.Fatalf("finding before the deadline: %+v", ls)
	}
	h.boot.Store(b.Now() + uint64(3*time.Second))
	ls := h.lines(1)
	f := ls[0]
	if f.Type != findingline.TypeFinding || f.Kind != string(apm.MissedRearm) || f.Severity != "error" || f.QP.Device != "rxe0" ||
		f.QP.QPN != 17 || f.Host != "hostA" || f.Bundle == "" {
		t.Fatalf("finding line: %+v", f)
	}
	m := d.m
	if got := testutil.ToFloat64(m.findings.WithLabelValues("missed-rearm", "error")); got != 1 {
		t.Fatalf("findings_total{missed-rearm,error} = %v", got)
	}
	if got := testutil.ToFloat64(m.openFindings.WithLabelValues("missed-rearm")); got != 1 {
		t.Fatalf("open_findings{missed-rearm} = %v", got)
	}
	if got := testutil.ToFloat64(m.migrations.WithLabelValues("rxe0", "ok")); got != 1 {
		t.Fatalf("migrations_total{rxe0,ok} = %v", got)
	}
	if got := testutil.ToFloat64(m.events.WithLabelValues("qp-event", "rxe0")); got != 1 {
		t.Fatalf("events_total{qp-event,rxe0} = %v", got)
	}

	// The bundle is written (BundleAfter 0: at the next tick) and replays to
	// the same finding.
	bundleDir := waitDir(t, f.Bundle)
	replayed := replayBundle(t, filepath.Join(bundleDir, BundleEvents), b.Now()+uint64(3*time.Second))
	if len(replayed) != 1 || replayed[0].Kind != apm.MissedRearm || replayed[0].QP.QPN != 17 {
		t.Fatalf("bundle replays to %v, want one missed-rearm on 17", replayed)
	}
	bl := readLines(t, filepath.Join(bundleDir, BundleFindings))
	if len(bl) != 1 || bl[0].ID != f.ID {
		t.Fatalf("bundle findings: %+v", bl)
	}

	// The late rearm resolves it, with the unprotected time.
	b.After(5 * time.Second)
	b.LoadAltRearm(17, apmtest.PathC)
	h.boot.Store(b.Now() + uint64(time.Second))
	h.feed(b.Steps[len(b.Steps)-1:])
	ls = h.lines(2)
	r := ls[1]
	if r.Type != findingline.TypeResolution || !r.Resolved || r.Resolves != f.ID || r.Unprotected < int64(5*time.Second) {
		t.Fatalf("resolution line: %+v", r)
	}
	if got := testutil.ToFloat64(m.openFindings.WithLabelValues("missed-rearm")); got != 0 {
		t.Fatalf("open_findings after resolution = %v", got)
	}
	if got := testutil.CollectAndCount(m.unprotected); got != 1 {
		t.Fatalf("unprotected_seconds series: %d", got)
	}
	h.src.lost.Store(7)
	time.Sleep(100 * time.Millisecond)
	if got := testutil.ToFloat64(m.lost); got != 7 {
		t.Fatalf("lost_events_total = %v", got)
	}

	h.stop()
	if !h.src.closed.Load() {
		t.Fatal("the source was not closed")
	}
	// The flight recorder's files are complete: no warnings.
	files, _ := filepath.Glob(filepath.Join(h.cfg.RecorderDir, flightPrefix+"*"))
	rd, err := recording.Open(files...)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, err := rd.Next(context.Background()); err != nil {
			break
		}
		n++
	}
	if w := rd.Warnings(); len(w) != 0 || n != len(b.Steps) {
		t.Fatalf("flight recorder: %d events of %d, warnings %v", n, len(b.Steps), w)
	}
	if rd.Stats().Lost != 7 {
		t.Fatalf("flight recorder lost counter %d, want 7", rd.Stats().Lost)
	}
	rd.Close()
}

// rdma netlink readings come in the probes' stream: the model judges them
// (PATH_MIG seen while the QP still reads ARMED: mig-state-mismatch), the flight
// recorder and the bundle keep them (the bundle replays to the same
// finding), a QP the probes never saw is reported once, the qps gauge
// follows the table.
func TestRunReadingsInTheStream(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ReconcileInterval = 100 * time.Millisecond })
	d := h.daemon()
	rc := func(qpn uint32, mig event.MigState) rdmanl.QP {
		return rdmanl.QP{Device: "rxe0", LQPN: qpn, Type: event.QPTypeRC, State: event.StateRTS, PathMig: mig, HasPathMig: true, PID: 9, Comm: "app"}
	}
	h.qps.Store(&[]rdmanl.QP{rc(17, event.MigArmed), rc(18, event.MigRearm)})
	b := apmtest.New()
	b.Device = "rxe0"
	missedRearm(b)
	h.feed(b.Steps)
	// Readings after the PATH_MIG, within the rearm deadline; then the clock
	// moves past the model's reorder window and the readings' grace
	// (TruthGrace, 1 s) so that they are judged, still before the rearm
	// deadline (2 s).
	h.boot.Store(b.Now() + uint64(500*time.Millisecond))
	time.Sleep(300 * time.Millisecond)
	h.boot.Store(b.Now() + uint64(1800*time.Millisecond))
	var f lineJSON
	for deadline := time.Now().Add(5 * time.Second); f.ID == 0; time.Sleep(10 * time.Millisecond) {
		for _, l := range readLines(t, h.cfg.Findings) {
			if l.Kind == string(apm.MigStateMismatch) && l.QP.QPN == 17 {
				f = l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no mig-state-mismatch on rxe0/17 from the readings\nlog:\n%s", h.stderr.String())
		}
	}
	bundleDir := waitDir(t, f.Bundle)
	got := replayBundle(t, filepath.Join(bundleDir, BundleEvents), h.boot.Load())
	if len(got) == 0 || got[0].Kind != apm.MigStateMismatch || got[0].QP.QPN != 17 {
		t.Fatalf("bundle replays to %v, want the mig-state-mismatch on 17 (its readings kept)", got)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(h.stderr.String(), "never seen by the probes"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("rxe0/18 not reported unseen\nlog:\n%s", h.stderr.String())
		}
	}
	time.Sleep(300 * time.Millisecond) // more readings: still reported once
	log := h.stderr.String()
	if strings.Count(log, "never seen by the probes") != 1 || !strings.Contains(log, "qpn=18 mig_state=REARM pid=9 comm=app") {
		t.Fatalf("unseen QPs: want rxe0/18 once\n%s", log)
	}
	m := d.m
	if got := testutil.ToFloat64(m.unseenQPs); got != 1 {
		t.Fatalf("unseen_qps_total = %v", got)
	}
	if a, r := testutil.ToFloat64(m.qps.WithLabelValues("rxe0", "ARMED")), testutil.ToFloat64(m.qps.WithLabelValues("rxe0", "REARM")); a != 1 || r != 1 {
		t.Fatalf("qps{rxe0,ARMED} = %v, qps{rxe0,REARM} = %v", a, r)
	}
	if got := testutil.ToFloat64(m.reconciles.WithLabelValues("ok")); got < 3 {
		t.Fatalf("reconciles_total{ok} = %v", got)
	}
	h.stop()
	files, _ := filepath.Glob(filepath.Join(h.cfg.RecorderDir, flightPrefix+"*"))
	rd, err := recording.Open(files...)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	truths := 0
	for {
		e, err := rd.Next(context.Background())
		if err != nil {
			break
		}
		if e.Kind == event.KindTruth && e.Truth != nil && e.Truth.Source == "netlink" {
			truths++
		}
	}
	if truths < 6 {
		t.Fatalf("the flight recorder holds %d readings, want every reading of both QPs", truths)
	}
}

func waitDir(t *testing.T, dir string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir
		}
		if time.Now().After(deadline) {
			t.Fatalf("bundle %s not written", dir)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// replayBundle runs a bundle's recording through a fresh model, judged
// until judge (Boot ns).
func replayBundle(t *testing.T, path string, judge uint64) []apm.Finding {
	t.Helper()
	return testkit.Replay(t, path, apm.DefaultConfig(), judge)
}

func TestRunSIGHUPReopensFindingLog(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RecorderDir = "" })
	h.daemon()
	b := h.feedMissedRearm()
	h.lines(1)
	if err := os.Rename(h.cfg.Findings, h.cfg.Findings+".1"); err != nil {
		t.Fatal(err)
	}
	h.hup <- struct{}{}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(h.stderr.String(), "reopened") {
		if time.Now().After(deadline) {
			t.Fatalf("no reopen logged:\n%s", h.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.After(time.Second)
	b.LoadAltRearm(17, apmtest.PathC)
	h.feed(b.Steps[len(b.Steps)-1:])
	h.boot.Store(b.Now() + uint64(3*time.Second)) // the host's clock only goes on
	if ls := h.lines(1); ls[0].Type != findingline.TypeResolution {
		t.Fatalf("after SIGHUP the new file has %+v", ls)
	}
	h.stop()
}

// Neither --findings nor --stdout: the finding lines go to standard output
// (never dropped); with a file and no --stdout, standard output stays empty.
func TestFindingsToStdout(t *testing.T) {
	for _, c := range []struct {
		findings bool
		want     bool
	}{{false, true}, {true, false}} {
		h := newHarness(t, func(cfg *Config) {
			if !c.findings {
				cfg.Findings = ""
			}
			cfg.RecorderDir = ""
		})
		h.daemon()
		b := apmtest.New()
		b.Device = "rxe0"
		missedRearm(b)
		h.boot.Store(b.Now())
		h.feed(b.Steps)
		h.boot.Store(b.Now() + uint64(3*time.Second))
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(h.stdout.String(), `"kind":"missed-rearm"`) && time.Now().Before(deadline) {
			if c.findings && len(readLines(t, h.cfg.Findings)) > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		h.stop()
		if got := strings.Contains(h.stdout.String(), `"kind":"missed-rearm"`); got != c.want {
			t.Errorf("findings file %v: finding line on stdout %v, want %v: %q", c.findings, got, c.want, h.stdout.String())
		}
	}
}
