package audit

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
	"github.com/apmwatch/apmwatch/recording"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// failingWriter is a recording writer on a disk that fills after n events.
type failingWriter struct {
	n      int
	closed bool
}

func (w *failingWriter) Write(*event.Event) error {
	if w.n == 0 {
		return &os.PathError{Op: "write", Path: "flight", Err: syscall.ENOSPC}
	}
	w.n--
	return nil
}
func (w *failingWriter) WriteStats(event.Stats) error { return nil }
func (w *failingWriter) Flush() error                 { return nil }
func (w *failingWriter) Close() error                 { w.closed = true; return nil }
func (w *failingWriter) Files() []string              { return nil }

func TestRecorderDroppedOnFullDiskAndRetried(t *testing.T) {
	m := newMetrics()
	var made []*failingWriter
	create := func(string, event.Meta, recording.Options) (eventWriter, error) {
		w := &failingWriter{n: 2}
		made = append(made, w)
		return w, nil
	}
	var warnings []string
	r, err := newRecorder(t.TempDir(), time.Minute, 8<<20, create, m, func(msg string, args ...any) {
		warnings = append(warnings, msg)
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	r.start(event.Meta{Host: "h"}, now)
	if got := testutil.ToFloat64(m.recorderUp); got != 1 {
		t.Fatalf("recorder_up %v", got)
	}
	for i := 0; i < 5; i++ {
		r.write(&event.Event{Seq: uint64(i + 1)}, now)
	}
	if r.w != nil || !made[0].closed || r.down != "disk full" {
		t.Fatalf("the recorder was not dropped: w=%v down=%q", r.w, r.down)
	}
	if testutil.ToFloat64(m.recorderUp) != 0 || testutil.ToFloat64(m.recorderErrors) != 1 {
		t.Fatal("recorder_up / recorder_errors_total not updated")
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "dropped") {
		t.Fatalf("warnings: %q", warnings)
	}
	r.tick(now.Add(recorderRetry / 2))
	if len(made) != 1 {
		t.Fatal("retried before recorderRetry")
	}
	r.tick(now.Add(recorderRetry))
	if len(made) != 2 || r.w == nil || testutil.ToFloat64(m.recorderUp) != 1 {
		t.Fatal("not retried after recorderRetry")
	}
}

// On a full disk the finding log frees room by deleting the recorder's
// files, and its line gets in.
func TestFindingsBeforeRecorder(t *testing.T) {
	dir := t.TempDir()
	m := newMetrics()
	r, _ := newRecorder(dir, time.Minute, 8<<20, createRecording, m, func(string, ...any) {})
	now := time.Now()
	r.start(event.Meta{Host: "h"}, now)
	r.write(&event.Event{Seq: 1, Kind: event.KindQPCreate, Device: "rxe0", QPN: 17, Life: &event.QPLife{}}, now)
	r.flush(now)
	if len(r.paths()) == 0 {
		t.Fatal("no flight files")
	}
	f := &fullFile{} // no room until the recorder's files are gone
	l, _ := newFindLog("f", func(string) (io.WriteCloser, error) { return f, nil }, nil, m, func(string, ...any) {})
	l.freeSpace = func() bool {
		freed := r.free(now)
		if freed {
			f.room = 1 << 20
		}
		return freed
	}
	l.write(testLine(1, apm.MissedRearm))
	if len(r.paths()) != 0 || r.w != nil {
		t.Fatalf("the recorder still holds %v", r.paths())
	}
	if !strings.HasSuffix(f.buf.String(), "\n") || len(l.pending) != 0 {
		t.Fatalf("the finding line did not get in: %q, %d pending", f.buf.String(), len(l.pending))
	}
}

func TestRecorderPrunesByBytesAndAge(t *testing.T) {
	dir := t.TempDir()
	r, _ := newRecorder(dir, time.Hour, 1<<20, createRecording, newMetrics(), func(string, ...any) {})
	now := time.Now()
	write := func(name string, size int, age time.Duration) {
		p := filepath.Join(dir, name)
		os.WriteFile(p, make([]byte, size), 0o644)
		os.Chtimes(p, now.Add(-age), now.Add(-age))
	}
	write("flight-a.000000", 100, 2*time.Hour) // too old
	write("flight-b.000000", 600<<10, 30*time.Minute)
	write("flight-b.000001", 600<<10, 20*time.Minute) // with the one above: over 1 MiB
	write("flight-b.000002", 100, time.Minute)
	write("other", 100, 3*time.Hour) // not the recorder's
	r.prune(now)
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if strings.Join(left, " ") != "flight-b.000001 flight-b.000002 other" {
		t.Fatalf("after pruning: %v", left)
	}
}

// The readings in the stream, as rdmanl.Merge merges them: a QP rdma netlink
// lists that the probes never saw is reported at its second reading, once;
// the model takes the readings, forgets QPs that vanish, and the tables
// follow; the qps gauge follows the last snapshot.
func TestReconcile(t *testing.T) {
	m := newMetrics()
	model, _ := apm.New(apm.DefaultConfig(), nil)
	r := newReconciler()
	feeder := rdmanl.NewFeeder()
	qp := func(dev string, qpn uint32, mig event.MigState) rdmanl.QP {
		return rdmanl.QP{Device: dev, LQPN: qpn, Type: event.QPTypeRC, State: event.StateRTS, PathMig: mig, HasPathMig: true}
	}
	// read takes one snapshot through the feeder, the reconciler and the
	// model, as the daemon does, and returns the unseen QPs and gone ones.
	read := func(snap rdmanl.Snapshot) (unseen []*event.Event, gone []event.QPKey) {
		m.reading(snap, nil)
		for _, e := range feeder.Events(snap) {
			if u := r.observe(e); u != nil {
				unseen = append(unseen, u)
			}
			if e.Truth.Op == event.TruthGone {
				gone = append(gone, e.Key())
			}
			model.Handle(e)
		}
		return unseen, gone
	}
	// The probes saw rxe0/17; rxe0/18 exists but was never seen.
	create := &event.Event{Kind: event.KindQPCreate, Device: "rxe0", QPN: 17, Boot: 100, Life: &event.QPLife{QPType: event.QPTypeRC}}
	feeder.Saw(create)
	r.observe(create)
	model.Handle(create)
	snap := rdmanl.Snapshot{Boot: 200, QPs: []rdmanl.QP{qp("rxe0", 17, event.MigArmed), qp("rxe0", 18, event.MigMigrated)}}
	if unseen, gone := read(snap); len(unseen) != 0 || len(gone) != 0 {
		t.Fatalf("first reading: unseen %v gone %v (an unseen QP is reported at the second)", unseen, gone)
	}
	if got := testutil.ToFloat64(m.qps.WithLabelValues("rxe0", "ARMED")); got != 1 {
		t.Fatalf("qps{rxe0,ARMED} = %v", got)
	}
	snap.Boot = 300
	unseen, _ := read(snap)
	if len(unseen) != 1 || unseen[0].QPN != 18 || unseen[0].Truth.Mig != event.MigMigrated {
		t.Fatalf("second reading: unseen %+v", unseen)
	}
	if unseen, _ := read(rdmanl.Snapshot{Boot: 350, QPs: snap.QPs}); len(unseen) != 0 {
		t.Fatal("an unseen QP was reported twice")
	}
	// Both vanish without a destroy: the model forgets them.
	if _, gone := read(rdmanl.Snapshot{Boot: 400}); len(gone) != 2 {
		t.Fatalf("gone: %+v", gone)
	}
	model.Finish(model.Now())
	if st := model.Stats(); st.QPs != 0 {
		t.Fatalf("the model still holds %d QPs", st.QPs)
	}
	if len(r.seen)+len(r.unseen)+len(r.reported) != 0 {
		t.Fatalf("reconciler tables not empty: %+v", r)
	}
	if testutil.CollectAndCount(m.qps) != 0 {
		t.Fatal("qps gauge keeps series of QPs that are gone")
	}
	m.reading(rdmanl.Snapshot{}, errors.New("no rdma netlink"))
	if ok, bad := testutil.ToFloat64(m.reconciles.WithLabelValues("ok")), testutil.ToFloat64(m.reconciles.WithLabelValues("error")); ok != 4 || bad != 1 {
		t.Fatalf("reconciles_total ok %v error %v, want 4 and 1", ok, bad)
	}
}

func TestModWatch(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "ib_core"), 0o755)
	os.Mkdir(filepath.Join(root, "ib_cm"), 0o755)
	w := newModWatch(root, []event.Hook{{Module: "ib_core"}, {Module: "ib_cm"}, {Module: "mlx5_ib"}}, moduleIDs(root))
	if got := w.changed(); got != "" {
		t.Fatalf("nothing changed, got %q", got)
	}
	// Reload ib_cm: a new directory (new inode) replaces the old one.
	os.Mkdir(filepath.Join(root, "ib_cm.new"), 0o755)
	os.Remove(filepath.Join(root, "ib_cm"))
	os.Rename(filepath.Join(root, "ib_cm.new"), filepath.Join(root, "ib_cm"))
	os.Mkdir(filepath.Join(root, "mlx5_ib"), 0o755)
	os.Remove(filepath.Join(root, "ib_core"))
	if got := w.changed(); got != "ib_cm reloaded, ib_core unloaded, mlx5_ib loaded" {
		t.Fatalf("got %q", got)
	}
	if got := w.changed(); got != "" {
		t.Fatalf("reported twice: %q", got)
	}
	// A module loaded while the probes were being attached is a change.
	before := moduleIDs(root)
	os.Mkdir(filepath.Join(root, "ib_core"), 0o755)
	w = newModWatch(root, []event.Hook{{Module: "ib_core"}}, before)
	if got := w.changed(); got != "ib_core loaded" {
		t.Fatalf("a module loaded during the attach: got %q", got)
	}
}

// webConfigFile writes a web configuration file holding text.
func webConfigFile(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigErrorsAreOneLine(t *testing.T) {
	for _, edit := range []func(*Config){
		func(c *Config) { c.MetricsAddr = "nonsense" },
		func(c *Config) { c.ReconcileInterval = time.Millisecond },
		func(c *Config) { c.RecorderDir, c.RecorderMaxBytes = "/x", 10 },
		func(c *Config) { c.Model.RearmDeadline = 0 },
		func(c *Config) { c.Profiles, c.MetricsAddr = true, "0.0.0.0:9578" },
		func(c *Config) { c.Profiles, c.MetricsAddr = true, "" },
		func(c *Config) { c.WebConfig = "/nonexistent/web.yml" },
		func(c *Config) { c.WebConfig, c.MetricsAddr = webConfigFile(t, "basic_auth_users: {a: b}\n"), "" },
		func(c *Config) { c.WebConfig = webConfigFile(t, "tls_server_config:\n  cert_file: x\n") },
		func(c *Config) { c.WebConfig = webConfigFile(t, "{{\n\x1b[2J") },
	} {
		c := DefaultConfig()
		edit(&c)
		err := c.Validate()
		if err == nil || strings.Contains(err.Error(), "\n") || strings.ToLower(err.Error()[:1]) != err.Error()[:1] {
			t.Errorf("want one lowercase line, got %v", err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.WebConfig = webConfigFile(t, "http_server_config:\n  http2: false\n")
	if err := c.Validate(); err != nil {
		t.Fatalf("a good web config: %v", err)
	}
}

func TestBuildInfoAndHooksMetrics(t *testing.T) {
	m := newMetrics()
	m.setHooks([]event.Hook{{Method: event.HookFentry}, {Method: event.HookFentry}, {Method: event.HookMissing}})
	if got := testutil.ToFloat64(m.hooks.WithLabelValues("fentry")); got != 2 {
		t.Fatalf("hooks{fentry} = %v", got)
	}
	if got := testutil.ToFloat64(m.hooks.WithLabelValues("kprobe")); got != 0 {
		t.Fatalf("hooks{kprobe} = %v", got)
	}
	n, err := testutil.GatherAndCount(m.reg, "apmwatch_build_info")
	if err != nil || n != 1 {
		t.Fatalf("build_info: %d series, %v", n, err)
	}
	for _, name := range []string{"go_gc_heap_live_bytes", "go_memstats_heap_inuse_bytes", "process_resident_memory_bytes"} {
		if n, err := testutil.GatherAndCount(m.reg, name); err != nil || n != 1 {
			t.Fatalf("%s: %d series, %v", name, n, err)
		}
	}
	if probs := mustLint(t, m); len(probs) != 0 {
		t.Fatalf("metric lint: %v", probs)
	}
}

func mustLint(t *testing.T, m *metrics) []string {
	probs, err := testutil.GatherAndLint(m.reg)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range probs {
		if !strings.HasPrefix(p.Metric, "apmwatch_") {
			continue
		}
		out = append(out, p.Metric+": "+p.Text)
	}
	return out
}

// A device name is bytes from the kernel: one that is not UTF-8 is counted
// under its escaped name instead of panicking the metrics.
func TestMetricsDeviceNotUTF8(t *testing.T) {
	m := newMetrics()
	bad := "mlx\xff\xfe_0"
	m.countEvent(&event.Event{Kind: event.KindQPEvent, Device: bad, QP: &event.QPEvent{Type: event.EvPathMig}})
	m.reading(rdmanl.Snapshot{QPs: []rdmanl.QP{{Device: bad, HasPathMig: true}}}, nil)
	if got := testutil.ToFloat64(m.events.WithLabelValues("qp-event", `mlx\xff\xfe_0`)); got != 1 {
		t.Fatalf("events{device=escaped} = %v", got)
	}
	if got := testutil.ToFloat64(m.migrations.WithLabelValues(`mlx\xff\xfe_0`, "ok")); got != 1 {
		t.Fatalf("migrations{device=escaped} = %v", got)
	}
	if _, err := m.reg.Gather(); err != nil {
		t.Fatal(err)
	}
}
