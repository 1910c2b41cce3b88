//go:build labguest

// The APM model inside `apmwatch trace`: the findings it prints (JSON lines
// with "kind":"finding") for the lab's scenarios, with ground truth read
// from rdma netlink into the stream, and the same findings from a
// postmortem of what `trace --record` wrote.
package guest

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// traceFindings stops the trace and returns the kinds of the findings it
// printed about dev/qpn, sorted (resolutions apart, as "kind(resolved)").
func traceFindings(t *testing.T, tr *Proc, dev string, qpn int64) []string {
	t.Helper()
	if err := tr.Stop(t); err != nil {
		t.Fatalf("trace on SIGTERM: %v\n%s", err, tr.Dump())
	}
	var out []string
	for _, l := range tr.Lines() {
		if l.Str("device") != dev || l.Int("qpn") != qpn {
			continue
		}
		switch l.Str("kind") {
		case "finding":
			out = append(out, l.Str("finding"))
		case "resolution":
			out = append(out, l.Str("finding")+"(resolved)")
		}
	}
	slices.Sort(out)
	return out
}

func wantTrace(t *testing.T, got []string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("trace findings %v, want %v", got, want)
	}
}

// traceScenario runs trace beside lab-pair with a behaviour, injects one
// event on rxe0's QP, waits for lab-pair's reaction and past the 2 s
// deadlines (and a netlink reading after the event), and stops lab-pair.
func traceScenario(t *testing.T, behavior, ev string, migrate bool, traceArgs ...string) (*Proc, int64) {
	t.Helper()
	tr := startApmwatch(t, append([]string{"trace", "-o", "json"}, traceArgs...)...)
	p, ready := startPair(t, "--behavior", behavior)
	q := QPN(t, ready, "rxe0")
	Inject(t, "rxe0", q, ev, migrate)
	_, i := p.Wait(t, 0, evTimeout, Match("dev", "rxe0", "qpn", q, "event_num", map[string]int{"path_mig": 6, "path_mig_err": 7}[ev]))
	p.Wait(t, i, evTimeout, Match("query", "after_event", "qpn", q))
	time.Sleep(2500 * time.Millisecond)
	p.Stop(t)
	return tr, q
}

func TestTraceFindingsNeverRearm(t *testing.T) {
	tr, q := traceScenario(t, "never-rearm", "path_mig", true)
	wantTrace(t, traceFindings(t, tr, "rxe0", q), "missed-rearm")
}

// rxe cannot load an alternate: a rearm is one without a new alternate,
// and never a missed-rearm.
func TestTraceFindingsRearm(t *testing.T) {
	tr, q := traceScenario(t, "rearm", "path_mig", true)
	wantTrace(t, traceFindings(t, tr, "rxe0", q), "rearm-without-new-alternate")
}

func TestTraceFindingsAltThenRearm(t *testing.T) {
	tr, q := traceScenario(t, "alt-then-rearm", "path_mig", true)
	wantTrace(t, traceFindings(t, tr, "rxe0", q), "apm-modify-failed", "rearm-without-new-alternate")
	for _, l := range Filter(tr.Lines(), Match("kind", "finding", "finding", "apm-modify-failed", "qpn", q)) {
		if l.Int("errno") != 22 || l.Str("errno_name") != "EINVAL" {
			t.Errorf("apm-modify-failed %v: want errno 22 EINVAL (APM is InfiniBand-only)", l)
		}
	}
}

func TestTraceFindingsMigrationError(t *testing.T) {
	tr, q := traceScenario(t, "never-rearm", "path_mig_err", false)
	wantTrace(t, traceFindings(t, tr, "rxe0", q), "migration-error")
}

// PATH_MIG while the QP does not move. Only the netlink
// readings in the stream can tell: mig-state-mismatch (and missed-rearm).
// The trace's recording replays to the same findings.
func TestTraceFindingsMismatchAndPostmortem(t *testing.T) {
	rec := t.TempDir() + "/trace.rec"
	tr, q := traceScenario(t, "never-rearm", "path_mig", false, "--record", rec)
	live := traceFindings(t, tr, "rxe0", q)
	wantTrace(t, live, "mig-state-mismatch", "missed-rearm")
	if n := len(Filter(tr.Lines(), Match("kind", "qp-truth"))); n != 0 {
		t.Errorf("%d qp-truth lines shown without --kind qp-truth", n)
	}
	var replayed []string
	for _, f := range findingSet(postmortem(t, rec)) {
		if k, ok := strings.CutSuffix(f, " rxe0/"+itoa(q)); ok {
			replayed = append(replayed, k)
		}
	}
	slices.Sort(replayed)
	if !slices.Equal(replayed, live) {
		t.Errorf("postmortem of the trace's recording: %v, live trace: %v", replayed, live)
	}
}

// Four quick migrations, each rearmed: forced ones (how the rxe lab
// emulates a migration), so no flapping, only the rearms without a new
// alternate that rxe forces (TestModelFlapping).
func TestTraceFindingsFlapping(t *testing.T) {
	tr := startApmwatch(t, "trace", "-o", "json")
	q := migrateRearmed(t, 4)
	got := traceFindings(t, tr, "rxe0", q)
	want := []string{"rearm-without-new-alternate", "rearm-without-new-alternate", "rearm-without-new-alternate", "rearm-without-new-alternate"}
	if !slices.Equal(got, want) {
		t.Errorf("findings %v: want %v", got, want)
	}
}

// A kernel ULP that never rearms: missed-rearm for a kernel QP.
func TestTraceFindingsKernelULP(t *testing.T) {
	tr := startApmwatch(t, "trace", "-o", "json")
	ls := MustRun(t, "lab-ulp", "start", "--behavior", "no-rearm")
	t.Cleanup(func() { Run(t, "lab-ulp", "stop") })
	q := QPN(t, Filter(ls, Match("kernel", true)), "rxe0")
	Inject(t, "rxe0", q, "path_mig", true)
	time.Sleep(2500 * time.Millisecond)
	got := traceFindings(t, tr, "rxe0", q)
	Run(t, "lab-ulp", "stop")
	wantTrace(t, got, "missed-rearm")
}
