//go:build labguest

// The day a switch dies: thousands of armed QPs on the simulated
// InfiniBand HCA migrate at once when a port fails. `apmwatch audit`
// (flight recorder on, the default ring buffer) and `apmwatch trace -o
// json` beside it must lose nothing, and judge each QP exactly once.
package guest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/actuator"
)

// stormPairs is how many lab-ibpair pairs the storm uses
// (APMWATCH_STORM_PAIRS, up to 2048; default 500, 1,000 QPs, which the
// TCG guest handles within make lab-test's time; docs/performance.md).
func stormPairs(t *testing.T) int {
	return envCount(t, "APMWATCH_STORM_PAIRS", 500)
}

// waitAuditCount waits until the finding log holds n findings of kind
// and returns when the last one was seen.
func waitAuditCount(t *testing.T, path, kind string, n int, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		kinds := map[string]int{}
		for _, l := range readAuditLines(t, path) {
			if l.Type == "finding" {
				kinds[l.Kind]++
			}
		}
		if kinds[kind] >= n {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s findings in %s, want %d (findings by kind: %v)", kinds[kind], kind, timeout, n, kinds)
		}
		time.Sleep(time.Second) // reading the log costs the guest's CPU
	}
}

// perQP counts findings of kind per QP ("dev/qpn") from a finding log.
func perQP(ls []auditLine, kind string) map[string]int {
	n := map[string]int{}
	for _, l := range ls {
		if l.Type == "finding" && l.Kind == kind {
			n[fmt.Sprintf("%s/%d", l.QP.Device, l.QP.QPN)]++
		}
	}
	return n
}

func vmHWM(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func TestIBStorm(t *testing.T) {
	pairs := stormPairs(t)
	dir := t.TempDir()
	a := startAudit(t, dir)
	log := filepath.Join(dir, "findings.jsonl")
	tr := ibTrace(t, "--kind", "finding,port-event")
	start := time.Now()
	p := Start(t, "lab-ibpair", "--behavior", "never-rearm", "--pairs", fmt.Sprint(pairs))
	t.Cleanup(func() { resetFabric(t) })
	ready, _ := p.WaitN(t, 0, 2*pairs, 15*time.Minute, Match("ready", true))
	t.Logf("%d QPs armed in %v", len(ready), time.Since(start))
	want := map[string]bool{}
	for _, r := range ready {
		want[fmt.Sprintf("%s/%d", r.Str("dev"), r.Int("qpn"))] = true
	}
	before := scrape(t)

	down := time.Now()
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
	last := waitAuditCount(t, log, "missed-rearm", 2*pairs, 10*time.Minute)
	after := scrape(t)
	t.Logf("storm: port down to the last of %d missed-rearm findings %v (rearm deadline 2s included); audit VmHWM %s",
		2*pairs, last.Sub(down), vmHWM(t, a.cmd.Process.Pid))
	eb, ea := eventsTotal(before), eventsTotal(after)
	t.Logf("audit events: %.0f before, %.0f after: %.0f events/s from port down to the last finding", eb, ea, (ea-eb)/last.Sub(down).Seconds())
	if lost := metricValue(after, "apmwatch_lost_events_total"); lost != "0" {
		t.Errorf("audit lost %s events in the storm", lost)
	}
	if m := metricValue(after, `apmwatch_migrations_total{device="ibsim0",result="ok"}`); m != fmt.Sprint(pairs) {
		t.Errorf("audit counted %s migrations on ibsim0, want %d", m, pairs)
	}

	// The path they moved onto fails too, on both hosts (a switch, say):
	// each end sees its own PORT_ERR on the port it runs on now, after its
	// migration, so the death is a new failure of an unprotected QP, not a
	// migration onto a dead alternate. (A failure only the remote host's
	// port shows is told apart by readings of the QP alive on its new path
	// past its retries; in a storm of this size in TCG they do not always
	// come in time, so the test does not lean on them.)
	for _, dev := range []string{"ibsim0", "ibsim1"} {
		MustRun(t, "lab-ib", "port", "--dev", dev, "--port", "2", "down")
	}
	// Every QP is judged dead exactly once. Which kind is not asserted
	// here: in this storm on 6.1 the model calls some of these deaths a
	// migration-error (a migration onto a dead alternate) although each
	// end's own port failed after its migration; TestIBFindings* assert
	// the kinds one connection at a time, and the split is logged.
	waitDeaths(t, log, 2*pairs, 10*time.Minute)
	ls := readAuditLines(t, log)
	for _, l := range ls {
		if l.Type == "finding" && l.Kind != "missed-rearm" && !deathKind(l.Kind) {
			t.Errorf("audit: unexpected finding %+v", l)
		}
	}
	deaths := map[string]int{}
	for q, n := range perQP(ls, "unprotected-failure") {
		deaths[q] += n
	}
	mig := perQP(ls, "migration-error")
	for q, n := range mig {
		deaths[q] += n
	}
	t.Logf("storm deaths: %d unprotected-failure, %d migration-error", len(perQP(ls, "unprotected-failure")), len(mig))
	for kind, m := range map[string]map[string]int{"missed-rearm": perQP(ls, "missed-rearm"), "unprotected-failure or migration-error": deaths} {
		for q := range want {
			if m[q] != 1 {
				t.Errorf("audit: %s %d times for %s, want once", kind, m[q], q)
			}
		}
		if len(m) != len(want) {
			t.Errorf("audit: %s for %d QPs, want %d", kind, len(m), len(want))
		}
	}
	if lost := metricValue(scrape(t), "apmwatch_lost_events_total"); lost != "0" {
		t.Errorf("audit lost %s events", lost)
	}
	t.Logf("audit VmHWM at the end %s", vmHWM(t, a.cmd.Process.Pid))

	if err := tr.Stop(t); err != nil {
		t.Fatalf("trace: %v\n%s", err, tr.Stderr())
	}
	t.Logf("trace summary:\n%s", tr.Stderr()) // the model's late inputs, if any, are in its "model:" line
	if !strings.Contains(tr.Stderr(), "lost: 0,") {
		t.Errorf("trace summary reports losses:\n%s", tr.Stderr())
	}
	count := map[string]map[string]int{"missed-rearm": {}, "death": {}}
	for _, l := range tr.Lines() {
		if l.Str("kind") == "finding" {
			k := l.Str("finding")
			if deathKind(k) {
				k = "death"
			}
			if count[k] == nil {
				t.Errorf("trace: unexpected finding %v", l)
				continue
			}
			count[k][fmt.Sprintf("%s/%d", l.Str("device"), l.Int("qpn"))]++
		}
	}
	// A death called a migration-error: what the trace had of the ports
	// around it (the kinds are not asserted yet, see above).
	var ports []Line
	migErr := false
	for _, l := range tr.Lines() {
		if l.Str("kind") == "port-event" {
			ports = append(ports, l)
		}
		migErr = migErr || l.Str("finding") == "migration-error"
	}
	if migErr {
		for _, l := range tr.Lines() {
			if l.Str("finding") == "migration-error" {
				t.Logf("trace: %v", l)
			}
		}
		for _, l := range ports {
			t.Logf("trace port event: %s port %d %s at %d", l.Str("device"), l.Int("port"), l.Str("event"), l.Int("boot_ns"))
		}
	}
	for kind, m := range count {
		for q := range want {
			if m[q] != 1 {
				t.Errorf("trace: %s %d times for %s, want once", kind, m[q], q)
			}
		}
	}
	p.Stop(t)
}

// eventsTotal sums apmwatch_events_total over its labels.
func eventsTotal(page string) float64 {
	var sum float64
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "apmwatch_events_total{") {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// The storm with `audit --enforce`, an alternates table and a rate limit of
// stormRate actions a second: every QP is rearmed once, at that rate (the
// actions over it wait for their turn: none is skipped), and reads ARMED
// again (both ends rearmed, traffic flowing). It logs how long the QPs
// were unprotected (PATH_MIG to the verified rearm).
// deathKind: how the model names a connection lost after a migration.
func deathKind(k string) bool { return k == "unprotected-failure" || k == "migration-error" }

// waitDeaths waits until the audit log holds n death findings.
func waitDeaths(t *testing.T, path string, n int, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		got := 0
		for _, l := range readAuditLines(t, path) {
			if l.Type == "finding" && deathKind(l.Kind) {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d death findings in %v, want %d", got, timeout, n)
		}
	}
}

// waitMigrated waits until the driver counts a migration on every QP of
// the ready lines.
func waitMigrated(t *testing.T, ready []Line, timeout time.Duration) {
	t.Helper()
	want := map[string]bool{}
	for _, r := range ready {
		want[fmt.Sprintf("%s/%d", r.Str("dev"), r.Int("qpn"))] = true
	}
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		n := 0
		for _, l := range ibShow(t) {
			if want[fmt.Sprintf("%s/%d", l.Str("dev"), l.Int("qpn"))] && l.Int("migrations") > 0 {
				n++
			}
		}
		if n == len(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d QPs migrated within %v", n, len(want), timeout)
		}
	}
}

func TestIBStormEnforce(t *testing.T) {
	// Below the pace of the actions themselves, so that the limit binds:
	// the actions over it must wait, not be skipped. APMWATCH_STORM_RATE
	// (a second) sets another, for example one that never binds, to
	// measure the enforcer's own pace.
	stormRate := envCount(t, "APMWATCH_STORM_RATE", 10)
	pairs := stormPairs(t) / 5 // the enforcer's pace, not the storm, sets the time
	pol := ibPolicy()
	pol.RateLimit = actuator.RateLimit{Max: stormRate, Per: actuator.Duration(time.Second), OwnerMax: stormRate}
	pol.Alternates = []actuator.AltRule{
		{Device: "ibsim0", Port: 2, Alt: actuator.AltSpec{Port: 1, DLID: 3}},
		{Device: "ibsim1", Port: 2, Alt: actuator.AltSpec{Port: 1, DLID: 1}},
	}
	log := startIBEnforcer(t, pol)
	p := Start(t, "lab-ibpair", "--behavior", "never-rearm", "--pairs", fmt.Sprint(pairs))
	t.Cleanup(func() { resetFabric(t) })
	ready, _ := p.WaitN(t, 0, 2*pairs, 5*time.Minute, Match("ready", true))
	down := time.Now()
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
	waitMigrated(t, ready, 2*time.Minute)                                // each QP notices when its retries run out
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "up") // the alternates' port
	first := waitAuditCount(t, log, "actuated", 1, 2*time.Minute)
	last := waitAuditCount(t, log, "actuated", 2*pairs, 5*time.Minute)
	ls := readAuditLines(t, log)
	acted := perQP(ls, "actuated")
	for _, r := range ready {
		q := fmt.Sprintf("%s/%d", r.Str("dev"), r.Int("qpn"))
		if acted[q] != 1 {
			t.Errorf("%s actuated %d times, want once", q, acted[q])
		}
	}
	for _, k := range []string{"actuation-failed", "actuation-skipped", "unprotected-failure"} {
		if n := len(perQP(ls, k)); n != 0 {
			t.Errorf("%d QPs with %s", n, k)
		}
	}
	// The limiter lets stormRate through in each second: N actions need at
	// least N/stormRate - 1 seconds after the first.
	// (from the actions' own stamps: the log is polled every second)
	var lo, hi uint64
	var windows []time.Duration
	for _, l := range ls {
		if l.Type == "finding" && l.Kind == "actuated" {
			if lo == 0 || l.Last < lo {
				lo = l.Last
			}
			hi = max(hi, l.Last)
			windows = append(windows, time.Duration(l.Unprotected))
		}
	}
	slices.Sort(windows)
	t.Logf("enforce storm: unprotected (PATH_MIG to verified rearm) min %v p50 %v p90 %v max %v",
		windows[0], windows[len(windows)/2], windows[len(windows)*9/10], windows[len(windows)-1])
	span := time.Duration(hi - lo)
	rate := float64(2*pairs) / (span.Seconds() + 1)
	t.Logf("enforce storm: %d QPs, rate limit %d/s: first actuated seen %v after the port failure, last %v; actions over %v: %.1f QPs rearmed a second",
		2*pairs, stormRate, first.Sub(down), last.Sub(down), span, rate)
	if minSpan := time.Duration(float64(2*pairs)/float64(stormRate)-1) * time.Second * 9 / 10; span < minSpan {
		t.Errorf("%d actions in %v, the policy allows %d a second (at least %v)", 2*pairs, span, stormRate, minSpan)
	}
	want := map[string]bool{}
	for _, r := range ready {
		want[fmt.Sprintf("%s/%d", r.Str("dev"), r.Int("qpn"))] = true
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		armed := 0
		for _, l := range ibShow(t) {
			if want[fmt.Sprintf("%s/%d", l.Str("dev"), l.Int("qpn"))] && l.Str("path_mig_state") == "ARMED" {
				armed++
			}
		}
		if armed == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d QPs ARMED again", armed, len(want))
		}
	}
	t.Logf("every QP ARMED again (the driver's view) %v after the port failure", time.Since(down))
	p.Stop(t)
}
