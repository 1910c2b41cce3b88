//go:build labguest

package guest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startApmwatch runs apmwatch with args plus --ready-file and waits until
// the probes are attached.
func startApmwatch(t *testing.T, args ...string) *Proc {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	p := Start(t, "apmwatch", append(append(args, labHooks(t)...), "--ready-file", ready)...)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("apmwatch %v not ready in 60s\n%s", args, p.Dump())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type pmReport struct {
	Summary struct {
		Events   uint64         `json:"events"`
		Findings map[string]int `json:"findings_by_kind"`
	} `json:"summary"`
	Findings []struct {
		Kind string `json:"kind"`
		Side string `json:"side"`
		QP   struct {
			Device string `json:"device"`
			QPN    uint32 `json:"qpn"`
		} `json:"qp"`
	} `json:"findings"`
	Pairs []struct {
		A, B     string
		Episodes []struct {
			Verdict string `json:"verdict"`
		} `json:"episodes"`
	} `json:"pairs"`
}

func postmortem(t *testing.T, files ...string) pmReport {
	t.Helper()
	out, err := exec.Command("apmwatch", append([]string{"postmortem", "-o", "json"}, files...)...).Output()
	if err != nil {
		t.Fatalf("apmwatch postmortem %v: %v", files, err)
	}
	var r pmReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("postmortem json: %v\n%s", err, out)
	}
	return r
}

func findingSet(r pmReport) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Kind+" "+f.QP.Device+"/"+itoa(int64(f.QP.QPN)))
	}
	sort.Strings(out)
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A missed rearm recorded by `record` and by `trace --record` at the same
// time: the postmortem of either finds it, and the trace's own output holds
// the same events as its recording.
func TestPostmortemMatchesLive(t *testing.T) {
	dir := t.TempDir()
	recFile, traceFile := filepath.Join(dir, "rec.rec"), filepath.Join(dir, "trace.rec")
	// no readings, no findings: the trace prints exactly the recorded events
	rec := startApmwatch(t, "record", "-w", recFile, "--reconcile-interval", "0")
	tr := startApmwatch(t, "trace", "-o", "json", "--record", traceFile, "--reconcile-interval", "0", "--no-findings")
	p, ready := startPair(t, "--behavior", "never-rearm")
	q := QPN(t, ready, "rxe0")
	Inject(t, "rxe0", q, "path_mig", true)
	p.Wait(t, 0, evTimeout, Match("event", "PATH_MIG", "qpn", q))
	time.Sleep(3 * time.Second) // past the 2 s rearm deadline
	p.Stop(t)
	// a recorder that does not stop is killed: its file is cut but readable
	if err := rec.Stop(t); err != nil {
		t.Errorf("record on SIGTERM: %v\n%s", err, rec.Dump())
	}
	if err := tr.Stop(t); err != nil {
		t.Errorf("trace on SIGTERM: %v\n%s", err, tr.Dump())
	}
	a, b := postmortem(t, recFile), postmortem(t, traceFile)
	want := "missed-rearm rxe0/" + itoa(q)
	fa, fb := findingSet(a), findingSet(b)
	found := false
	for _, f := range fa {
		found = found || f == want
	}
	if !found {
		t.Errorf("postmortem of the recording: %v, want %q among them", fa, want)
	}
	if strings.Join(fa, ",") != strings.Join(fb, ",") {
		t.Errorf("record and trace --record disagree: %v vs %v", fa, fb)
	}
	if shown := uint64(len(tr.Lines())); b.Summary.Events != shown {
		t.Errorf("trace printed %d events, its recording holds %d", shown, b.Summary.Events)
	}
}

// lab-pair's two sides recorded by two apmwatch instances filtered by device
// (standing in for two hosts) merge into one pair; only rxe0 migrates and
// rearms, so rxe1's side is a one-sided rearm.
func TestPostmortemTwoSides(t *testing.T) {
	dir := t.TempDir()
	f0, f1 := filepath.Join(dir, "rxe0.rec"), filepath.Join(dir, "rxe1.rec")
	r0 := startApmwatch(t, "record", "-w", f0, "--device", "rxe0")
	r1 := startApmwatch(t, "record", "-w", f1, "--device", "rxe1")
	p, ready := startPair(t, "--behavior", "rearm")
	q0, q1 := QPN(t, ready, "rxe0"), QPN(t, ready, "rxe1")
	Inject(t, "rxe0", q0, "path_mig", true)
	p.Wait(t, 0, evTimeout, Match("modify", "rearm", "qpn", q0))
	time.Sleep(3 * time.Second)
	p.Stop(t)
	for _, r := range []*Proc{r0, r1} {
		if err := r.Stop(t); err != nil {
			t.Errorf("record on SIGTERM: %v\n%s", err, r.Dump())
		}
	}
	r := postmortem(t, f0, f1)
	if len(r.Pairs) != 1 {
		t.Fatalf("pairs: %+v", r.Pairs)
	}
	pr := r.Pairs[0]
	if !strings.Contains(pr.A, "/rxe0/"+itoa(q0)+"#") || !strings.Contains(pr.B, "/rxe1/"+itoa(q1)+"#") {
		t.Errorf("pair %s <-> %s, want rxe0/%d <-> rxe1/%d", pr.A, pr.B, q0, q1)
	}
	if len(pr.Episodes) != 1 || !strings.HasPrefix(pr.Episodes[0].Verdict, "one-sided") {
		t.Errorf("episodes: %+v", pr.Episodes)
	}
	if r.Summary.Findings["one-sided-rearm"] != 1 {
		t.Errorf("findings: %v", findingSet(r))
	}
}
