//go:build labguest

// These tests need root inside the lab guest (make lab-test).
package guest

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// ulpLog returns the apmlab log records after sequence number from.
func ulpLog(t testing.TB, from int64) []Line {
	t.Helper()
	return Filter(MustRun(t, "lab-ulp", "log"), func(l Line) bool { return l.Int("seq") >= from })
}

// waitLog polls the log until match holds for a record after from.
func waitLog(t testing.TB, from int64, what string, match func(Line) bool) Line {
	t.Helper()
	deadline := time.Now().Add(evTimeout)
	for {
		if m := Filter(ulpLog(t, from), match); len(m) > 0 {
			return m[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the apmlab log: %v", what, ulpLog(t, from))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func nextSeq(t testing.TB) int64 {
	ls := ulpLog(t, 0)
	if len(ls) == 0 {
		return 0
	}
	return ls[len(ls)-1].Int("seq") + 1
}

// The kernel ULP's handler sees the injected PATH_MIG and reacts per
// behaviour from its workqueue; RoCE rejects its alternate path with EINVAL.
func TestKernelULP(t *testing.T) {
	ls := MustRun(t, "lab-ulp", "start", "--behavior", "correct")
	t.Cleanup(func() { Run(t, "lab-ulp", "stop") })
	qps := Filter(ls, Match("kernel", true))
	if len(qps) != 2 {
		t.Fatalf("lab-ulp start: want 2 QP lines, got %v", ls)
	}
	for _, q := range qps {
		if q.Str("qp_state") != "RTS" || q.Str("path_mig_state") != "REARM" {
			t.Errorf("kernel QP %v, want RTS and REARM", q)
		}
	}
	q := QPN(t, qps, "rxe0")
	if r := Run(t, "lab-ulp", "start"); r.Code != 1 || !strings.Contains(r.Stderr, "already running") {
		t.Errorf("second start: exit %d, stderr %q; want 1, already running", r.Code, r.Stderr)
	}

	t.Run("correct", func(t *testing.T) {
		from := nextSeq(t)
		rec := Inject(t, "rxe0", q, "path_mig", true)
		if rec.Str("owner") != "kernel" {
			t.Errorf("injection record %v, want owner kernel", rec)
		}
		waitLog(t, from, "PATH_MIG event", Match("kind", "event", "event", "PATH_MIG", "qpn", q))
		alt := waitLog(t, from, "alternate-path modify", Match("kind", "modify", "what", "alt_path", "qpn", q))
		if alt.Int("ret") != -22 {
			t.Errorf("kernel alternate path load: %v, want ret -22 (EINVAL)", alt)
		}
		re := waitLog(t, from, "rearm", Match("kind", "modify", "what", "rearm", "qpn", q))
		if re.Int("ret") != 0 {
			t.Errorf("kernel rearm: %v, want ret 0", re)
		}
		st := waitLog(t, from, "query", Match("kind", "query", "qpn", q))
		if st.Str("path_mig_state") != "REARM" {
			t.Errorf("after the correct reaction: %v, want REARM", st)
		}
	})

	t.Run("no-rearm", func(t *testing.T) {
		MustRun(t, "lab-ulp", "behavior", "no-rearm")
		from := nextSeq(t)
		Inject(t, "rxe0", q, "path_mig", true)
		st := waitLog(t, from, "query", Match("kind", "query", "qpn", q))
		if st.Str("path_mig_state") != "MIGRATED" {
			t.Errorf("after no-rearm: %v, want MIGRATED", st)
		}
		if m := Filter(ulpLog(t, from), Match("kind", "modify")); len(m) != 0 {
			t.Errorf("no-rearm modified the QP: %v", m)
		}
	})

	t.Run("rearm-no-alt", func(t *testing.T) {
		MustRun(t, "lab-ulp", "behavior", "rearm-no-alt")
		from := nextSeq(t)
		Inject(t, "rxe0", q, "path_mig", true)
		st := waitLog(t, from, "query", Match("kind", "query", "qpn", q))
		if st.Str("path_mig_state") != "REARM" {
			t.Errorf("after rearm-no-alt: %v, want REARM", st)
		}
		mods := Filter(ulpLog(t, from), Match("kind", "modify"))
		if len(mods) != 1 || mods[0].Str("what") != "rearm" || mods[0].Int("ret") != 0 {
			t.Errorf("rearm-no-alt modifies: %v, want one accepted rearm", mods)
		}
	})

	MustRun(t, "lab-ulp", "stop")
	if r := Run(t, "lab-inject", "--dev", "rxe0", "--qpn", strconv.FormatInt(q, 10), "--event", "path_mig"); r.Code != 1 {
		t.Errorf("injecting on a destroyed kernel QP: exit %d, want 1 (no such QP)", r.Code)
	}
}
