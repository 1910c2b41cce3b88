package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/output"
	"github.com/apmwatch/apmwatch/rdmanl"
)

const sec = uint64(time.Second)

func qpEvent(seq, boot uint64, qpn uint32, t event.EventType) *event.Event {
	return &event.Event{Seq: seq, Kind: event.KindQPEvent, Boot: boot, Time: time.Unix(0, int64(boot)),
		PID: 300, Comm: "app", Device: "rxe0", QPN: qpn,
		QP: &event.QPEvent{Type: t, QPType: event.QPTypeRC, Origin: event.OriginUser}}
}

// lines decodes JSON lines by their "kind".
func lines(t *testing.T, out string) map[string][]map[string]any {
	t.Helper()
	m := map[string][]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		m[v["kind"].(string)] = append(m[v["kind"].(string)], v)
	}
	return m
}

// The trace runs the model on every event: a PATH_MIG nobody rearms is a
// missed-rearm once the deadline passes on the live clock (no event after
// it), a PATH_MIG_ERR a migration-error, and the netlink reading that the
// migrated QP still reads REARM a mig-state-mismatch. The display filter
// hides QP 18's finding and every reading, the summary counts them all,
// and the recording holds the readings for a replay.
func TestTraceFindings(t *testing.T) {
	dir := t.TempDir()
	ready, rec := filepath.Join(dir, "ready"), filepath.Join(dir, "t.rec")
	src := &fakeSource{live: []*event.Event{qpEvent(1, 1*sec, 17, event.EvPathMig), qpEvent(2, 1*sec+1, 18, event.EvPathMigErr)}}
	snap := func() (rdmanl.Snapshot, error) {
		return rdmanl.Snapshot{Boot: 2 * sec, QPs: []rdmanl.QP{{Device: "rxe0", LQPN: 17, Type: event.QPTypeRC,
			State: event.StateRTS, PathMig: event.MigRearm, HasPathMig: true, PID: 300, Comm: "app"}}}, nil
	}
	f, err := output.ParseFilter(nil, []string{"17"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err = RunTrace(context.Background(), TraceConfig{Output: "json", Filter: f, Duration: 400 * time.Millisecond,
		ReadyFile: ready, Record: rec, Model: apm.DefaultConfig(), Reconcile: time.Hour},
		TraceDeps{Open: func() (event.Source, error) { return src, nil }, Snapshot: snap,
			Boot: func() uint64 { return 10 * sec }, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	got := lines(t, out.String())
	if len(got["qp-event"]) != 1 || len(got["qp-truth"]) != 0 || len(got["finding"]) != 2 {
		t.Fatalf("want QP 17's event and its two findings, no readings:\n%s", out.String())
	}
	kinds := map[string]bool{}
	for _, l := range got["finding"] {
		kinds[l["finding"].(string)] = true
		if l["qpn"] != 17.0 || l["device"] != "rxe0" || l["comm"] != "app" || l["resolved"] != false {
			t.Errorf("finding line %v", l)
		}
	}
	if !kinds["missed-rearm"] || !kinds["mig-state-mismatch"] {
		t.Errorf("findings %v, want missed-rearm and mig-state-mismatch", kinds)
	}
	for _, want := range []string{"events: 3 seen, 1 shown", "qp-truth=1",
		"findings: 3 (0 resolved; 2 lines shown): missed-rearm=1 mig-state-mismatch=1 migration-error=1",
		"  missed-rearm: rearm: after each migration"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, errb.String())
		}
	}
	evs, _ := readAll(t, rec)
	if len(evs) != 3 || evs[0].Kind != event.KindTruth || evs[0].Truth.Mig != event.MigRearm {
		t.Errorf("recording: %d events, first %+v: want the reading first, then the two events", len(evs), evs[0])
	}
	if _, err := os.Stat(ready); err != nil {
		t.Error("no ready file")
	}
}

// --no-findings: events only, and the summary says the model did not run.
func TestTraceNoFindings(t *testing.T) {
	src := &fakeSource{live: []*event.Event{qpEvent(1, sec, 18, event.EvPathMigErr)}}
	var out, errb bytes.Buffer
	err := RunTrace(context.Background(), TraceConfig{Output: "json", Duration: 50 * time.Millisecond, NoFindings: true},
		TraceDeps{Open: func() (event.Source, error) { return src, nil }, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), `"finding"`) || !strings.Contains(errb.String(), "findings: not judged (--no-findings)") {
		t.Errorf("out:\n%s\nsummary:\n%s", out.String(), errb.String())
	}
}

// --kind selects events and findings by kind: a finding kind shows only
// those findings; "finding" every finding.
func TestTraceKindFilter(t *testing.T) {
	for _, c := range []struct {
		kind          string
		events, finds int
	}{{"qp-event", 1, 0}, {"migration-error", 0, 1}, {"missed-rearm", 0, 0}, {"finding", 0, 1}, {"qp-event,finding", 1, 1}} {
		f, err := output.ParseFilter(nil, nil, nil, nil, []string{c.kind})
		if err != nil {
			t.Fatal(err)
		}
		src := &fakeSource{live: []*event.Event{qpEvent(1, sec, 18, event.EvPathMigErr)}}
		var out bytes.Buffer
		err = RunTrace(context.Background(), TraceConfig{Output: "json", Filter: f, Duration: 30 * time.Millisecond, Model: apm.DefaultConfig()},
			TraceDeps{Open: func() (event.Source, error) { return src, nil }, Stdout: &out, Stderr: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]map[string]any{}
		if out.Len() > 0 {
			got = lines(t, out.String())
		}
		if len(got["qp-event"]) != c.events || len(got["finding"]) != c.finds {
			t.Errorf("--kind %s: %d events, %d findings; want %d, %d", c.kind, len(got["qp-event"]), len(got["finding"]), c.events, c.finds)
		}
	}
}

func TestRunTraceSummaryAndErrors(t *testing.T) {
	src := newFake(3, 1)
	src.stats = event.Stats{Events: 4, Lost: 3, LostPerCPU: []uint64{1, 2}}
	var out, errb bytes.Buffer
	f, _ := output.ParseFilter([]string{"rxe0"}, nil, nil, nil, nil)
	err := RunTrace(context.Background(), TraceConfig{Output: "table", Filter: f, Duration: 30 * time.Millisecond, Model: apm.DefaultConfig()},
		TraceDeps{Open: func() (event.Source, error) { return src, nil }, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"events: 4 seen, 2 shown", "modify=4", "lost: 3 (per cpu [1 2])", "findings: 0"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("summary lacks %q (the drained tail counts too):\n%s", want, errb.String())
		}
	}
	noPriv := errors.New("need root")
	deps := TraceDeps{Open: func() (event.Source, error) { t.Fatal("opened"); return nil, nil },
		Check: func() error { return noPriv }, Stdout: io.Discard, Stderr: io.Discard}
	if err := RunTrace(context.Background(), TraceConfig{Model: apm.DefaultConfig()}, deps); !errors.Is(err, noPriv) {
		t.Errorf("check failure: %v", err)
	}
	if err := RunTrace(context.Background(), TraceConfig{Output: "yaml"}, deps); err == nil || !strings.Contains(err.Error(), "bad --output") {
		t.Errorf("bad output: %v", err)
	}
	deps.Check = nil
	if err := RunTrace(context.Background(), TraceConfig{}, deps); err == nil || !strings.HasPrefix(err.Error(), "invalid apm config") {
		t.Errorf("zero thresholds: %v", err)
	}
	var dry bytes.Buffer
	deps.Plan = func() ([]event.Hook, error) {
		return []event.Hook{{Name: "ib_modify_qp", Method: event.HookFentry}}, nil
	}
	deps.Stdout = &dry
	if err := RunTrace(context.Background(), TraceConfig{DryRun: true}, deps); err != nil || !strings.Contains(dry.String(), "ib_modify_qp") {
		t.Errorf("dry run: %v\n%s", err, dry.String())
	}
	// trace --dry-run prints what apmwatch probes prints, in both formats.
	for _, format := range []string{"table", "json"} {
		var tr, pr bytes.Buffer
		deps.Stdout = &tr
		if err := RunTrace(context.Background(), TraceConfig{DryRun: true, Output: format}, deps); err != nil {
			t.Fatal(err)
		}
		if err := output.RunProbes(format == "json", output.ProbesDeps{Plan: deps.Plan, Stdout: &pr}); err != nil {
			t.Fatal(err)
		}
		if tr.String() != pr.String() || tr.Len() == 0 {
			t.Errorf("-o %s: trace --dry-run printed\n%s\nprobes printed\n%s", format, tr.String(), pr.String())
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A deadline fires while the source is quiet: the missed-rearm is shown
// when the live clock passes it, not when the trace ends.
func TestTraceDeadlineWhileIdle(t *testing.T) {
	var boot atomic.Uint64
	boot.Store(sec + 1)
	src := &fakeSource{live: []*event.Event{qpEvent(1, sec, 17, event.EvPathMig)}}
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunTrace(ctx, TraceConfig{Output: "json", Model: apm.DefaultConfig()},
			TraceDeps{Open: func() (event.Source, error) { return src, nil }, Boot: boot.Load, Stdout: &out, Stderr: io.Discard})
	}()
	time.Sleep(3 * advanceEvery)
	if strings.Contains(out.String(), "missed-rearm") {
		t.Fatal("missed-rearm before the deadline")
	}
	boot.Store(4 * sec)
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), "missed-rearm"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no missed-rearm while the trace runs:\n%s", out.String())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
