//go:build labguest

// The unprotected window of `--enforce` on the simulated InfiniBand HCA,
// where the enforcer's new alternate is accepted (on RoCE it is not sent):
// audit.Run with the enforcer as actor, a never-rearm pair on ibsim0 and
// ibsim1, the switch failing the primary's LID again and again.
package guest

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/actuator"
)

// TestIBAuditEnforceWindow: each round the switch stops routing to the
// primary path's remote LID (3, then 4, ...), both QPs migrate, the
// enforcer loads the previous primary as the new alternate and rearms both
// ends at the rearm deadline, and the QPs read ARMED onto the failed path
// (back up) before the next round fails the other one. The window is
// PATH_MIG to the verified rearm (`unprotected_ns`), split into the wait
// for the decision and the action (docs/performance.md "Unprotected
// window"). One enforcer serves both ends, one after the other, as one
// audit daemon on a host with both ends would.
func TestIBAuditEnforceWindow(t *testing.T) {
	p := ibPolicy()
	p.Mode = actuator.ModeEnforce
	p.PreviousPrimary = true
	p.RateLimit = actuator.RateLimit{Max: 1000, Per: actuator.Duration(time.Minute), OwnerMax: 1000}
	clock := newActionClock()
	e := clock.enforcer(p)
	log, _ := runEnforcer(t, e)
	pair, ready := startIBPair(t, 1, "never-rearm")
	defer pair.Stop(t)
	qps := map[string]int64{"ibsim0": QPN(t, ready, "ibsim0"), "ibsim1": QPN(t, ready, "ibsim1")}
	// The primary starts on port 1 (LIDs 1 and 3) with the alternate on
	// port 2 (LIDs 2 and 4): failing LID 3 moves both to port 2, failing
	// LID 4 moves them back.
	remote := map[string][2]int64{"ibsim0": {3, 4}, "ibsim1": {1, 2}}
	runs := envCount(t, "APMWATCH_ENFORCE_RUNS", 4)
	var windows, decide, act []time.Duration
	for i := 1; i <= runs; i++ {
		lid, from, to := 3, 1, 2 // failed LID; port before, port after
		if i%2 == 0 {
			lid, from, to = 4, 2, 1
		}
		MustRun(t, "lab-ib", "link", "--lid", fmt.Sprint(lid), "down")
		for dev, q := range qps {
			waitIB(t, dev, q, "migrated", Match("path_mig_state", "MIGRATED", "port", to))
		}
		MustRun(t, "lab-ib", "link", "--lid", fmt.Sprint(lid), "up")
		for dev, q := range qps {
			l := waitKindOn(t, log, string(actuator.KindActuated), dev, q, i)
			if l.Unprotected < int64(enforceDeadline) {
				t.Fatalf("round %d %s: acted %v after PATH_MIG, before the %v deadline: %+v", i, dev, time.Duration(l.Unprotected), enforceDeadline, l)
			}
			windows = append(windows, time.Duration(l.Unprotected))
			if s, ok := clock.start(dev, i); ok && l.First > 0 {
				decide = append(decide, time.Duration(int64(s)-int64(l.First)-int64(enforceDeadline)))
				act = append(act, time.Duration(int64(l.Last)-int64(s)))
			}
			// The previous primary, accepted: armed onto the path that
			// failed (routed again).
			dlid := remote[dev][from-1]
			waitIB(t, dev, q, "armed onto the previous primary",
				Match("path_mig_state", "ARMED", "port", to, "alt_port", from, "alt_dlid", dlid))
		}
	}
	for dev, q := range qps {
		if n := auditKinds(t, log, dev, q); n["actuation-failed"] != 0 || n["unprotected-failure"] != 0 || n["actuated"] != runs {
			t.Errorf("%s findings %v: want %d actuated, no actuation-failed, no unprotected-failure", dev, n, runs)
		}
	}
	logWindows(t, windows, decide, act)
	clock.logParts(t)
}

// logWindows logs the distribution of the unprotected windows and of
// their two parts (deadline to decision, the action).
func logWindows(t *testing.T, windows, decide, act []time.Duration) {
	t.Helper()
	if len(act) > 0 {
		// Round 1 holds the daemon's first actions (on ibsim both ends act
		// at once: this is the one logged first; the action clock names
		// the very first).
		t.Logf("the first window %v, of which the action %v (round 1)", windows[0], act[0])
	}
	for _, d := range [][]time.Duration{windows, decide, act} {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	}
	q := func(d []time.Duration, f float64) time.Duration { return d[int(f*float64(len(d)-1))] }
	t.Logf("unprotected window (deadline %v, grace 0, %d windows): min %v p50 %v p90 %v p99 %v max %v; all %v",
		enforceDeadline, len(windows), windows[0], q(windows, 0.5), q(windows, 0.9), q(windows, 0.99), windows[len(windows)-1], windows)
	if len(decide) == len(windows) {
		t.Logf("of which: deadline to the action's start p50 %v p99 %v max %v; the action p50 %v p99 %v max %v",
			q(decide, 0.5), q(decide, 0.99), decide[len(decide)-1], q(act, 0.5), q(act, 0.99), act[len(act)-1])
	}
}
