//go:build labguest

// These tests need root inside the lab guest (make lab-test).
package guest

import (
	"testing"
	"time"
)

const evTimeout = 15 * time.Second

// startPair runs lab-pair with a behaviour and returns it with its ready lines.
func startPair(t *testing.T, args ...string) (*Proc, []Line) {
	t.Helper()
	p := Start(t, "lab-pair", append([]string{"--duration", "2m"}, args...)...)
	return p, p.Ready(t, 2)
}

func TestPairReachesRTSArmed(t *testing.T) {
	p, ready := startPair(t, "--behavior", "rearm")
	for _, dev := range []string{"rxe0", "rxe1"} {
		q := QPN(t, ready, dev)
		if q <= 1 {
			t.Fatalf("%s: bad qpn %d", dev, q)
		}
		st := Filter(p.Lines(), Match("query", "after_setup", "dev", dev, "qpn", q))
		if len(st) != 1 || st[0].Str("qp_state") != "RTS" || st[0].Str("path_mig_state") != "REARM" {
			t.Errorf("%s QP %d after setup: %v, want RTS and REARM", dev, q, st)
		}
	}
	if err := p.Stop(t); err != nil {
		t.Errorf("lab-pair on SIGTERM: %v\n%s", err, p.Dump())
	}
	if len(Filter(p.Lines(), Match("exit", true))) != 1 {
		t.Errorf("no exit line after SIGTERM\n%s", p.Dump())
	}
}

// The event arrives but mig_state is not MIGRATED,
// because nothing migrated. Without --migrate the state stays REARM.
func TestInjectedPathMigReachesApp(t *testing.T) {
	p, ready := startPair(t, "--behavior", "never-rearm")
	q := QPN(t, ready, "rxe1")
	rec := Inject(t, "rxe1", q, "path_mig", false)
	if rec.Str("owner") != "user" || rec.Str("event") != "PATH_MIG" {
		t.Errorf("injection record %v, want owner user, event PATH_MIG", rec)
	}
	ev, i := p.Wait(t, 0, evTimeout, Match("event", "PATH_MIG", "dev", "rxe1", "qpn", q))
	if ev.Int("event_num") != 6 {
		t.Errorf("event_num %d, want 6 (IBV_EVENT_PATH_MIG)", ev.Int("event_num"))
	}
	st, _ := p.Wait(t, i, evTimeout, Match("query", "after_event", "qpn", q))
	if st.Str("path_mig_state") != "REARM" {
		t.Errorf("without --migrate the QP should stay REARM, got %v", st)
	}
	if m := Filter(p.Lines()[i:], Match("modify", "rearm")); len(m) != 0 {
		t.Errorf("never-rearm modified the QP: %v", m)
	}
}

// Any event type goes through the QP's own handler to the owner.
func TestInjectedEventsReachApp(t *testing.T) {
	p, ready := startPair(t, "--behavior", "never-rearm")
	q := QPN(t, ready, "rxe0")
	i := 0
	for _, c := range []struct {
		arg, name string
		num       int
	}{
		{"path_mig_err", "PATH_MIG_ERR", 7},
		{"comm_est", "COMM_EST", 4},
		{"5", "SQ_DRAINED", 5},
	} {
		Inject(t, "rxe0", q, c.arg, false)
		var ev Line
		ev, i = p.Wait(t, i, evTimeout, Match("event", c.name, "qpn", q))
		if ev.Int("event_num") != int64(c.num) {
			t.Errorf("%s: event_num %d, want %d", c.arg, ev.Int("event_num"), c.num)
		}
	}
}

func TestMigrateThenRearm(t *testing.T) {
	p, ready := startPair(t, "--behavior", "rearm")
	q := QPN(t, ready, "rxe0")
	rec := Inject(t, "rxe0", q, "path_mig", true)
	if rec.Str("migrate") != "true" || rec.Int("modify_ret") != 0 {
		t.Errorf("injection record %v, want migrate true, modify_ret 0", rec)
	}
	_, i := p.Wait(t, 0, evTimeout, Match("event", "PATH_MIG", "qpn", q))
	st, i := p.Wait(t, i, evTimeout, Match("query", "after_event", "qpn", q))
	if st.Str("path_mig_state") != "MIGRATED" || st.Str("qp_state") != "RTS" {
		t.Errorf("after --migrate: %v, want RTS and MIGRATED", st)
	}
	m, i := p.Wait(t, i, evTimeout, Match("modify", "rearm", "qpn", q))
	if m.Int("ret") != 0 {
		t.Errorf("rearm rejected: %v", m)
	}
	st, _ = p.Wait(t, i, evTimeout, Match("query", "after_react", "qpn", q))
	if st.Str("path_mig_state") != "REARM" {
		t.Errorf("after rearm: %v, want REARM", st)
	}
}

// The project relies on this: RoCE ports reject IB_QP_ALT_PATH with EINVAL,
// and a rearm without a new alternate path is still accepted.
func TestAltPathEINVALOnRoCE(t *testing.T) {
	for _, c := range []struct{ behavior, first, second string }{
		{"alt-then-rearm", "alt_path", "rearm"},
		{"rearm-then-alt", "rearm", "alt_path"},
	} {
		t.Run(c.behavior, func(t *testing.T) {
			p, ready := startPair(t, "--behavior", c.behavior)
			q := QPN(t, ready, "rxe0")
			Inject(t, "rxe0", q, "path_mig", true)
			_, i := p.Wait(t, 0, evTimeout, Match("event", "PATH_MIG", "qpn", q))
			st, _ := p.Wait(t, i, evTimeout, Match("query", "after_react", "qpn", q))
			mods := Filter(p.Lines()[i:], func(l Line) bool { return l.Has("modify") && l.Int("qpn") == q })
			if len(mods) != 2 || mods[0].Str("modify") != c.first || mods[1].Str("modify") != c.second {
				t.Fatalf("modifies after the event: %v, want %s then %s", mods, c.first, c.second)
			}
			for _, m := range mods {
				want := int64(0)
				if m.Str("modify") == "alt_path" {
					want = 22 // EINVAL
				}
				if m.Int("errno") != want {
					t.Errorf("%s: errno %d, want %d: %v", m.Str("modify"), m.Int("errno"), want, m)
				}
			}
			if st.Str("path_mig_state") != "REARM" {
				t.Errorf("after %s: %v, want REARM", c.behavior, st)
			}
		})
	}
}

func TestLateRearm(t *testing.T) {
	p, ready := startPair(t, "--behavior", "late-rearm=700ms")
	q := QPN(t, ready, "rxe0")
	start := time.Now()
	Inject(t, "rxe0", q, "path_mig", true)
	st, i := p.Wait(t, 0, evTimeout, Match("query", "after_event", "qpn", q))
	if st.Str("path_mig_state") != "MIGRATED" {
		t.Errorf("after the event: %v, want MIGRATED", st)
	}
	_, i = p.Wait(t, i, evTimeout, Match("scheduled", "rearm", "qpn", q))
	st, _ = p.Wait(t, i, evTimeout, Match("query", "after_react", "qpn", q))
	if d := time.Since(start); d < 600*time.Millisecond {
		t.Errorf("late rearm after %s, want >= 700ms", d)
	}
	if st.Str("path_mig_state") != "REARM" {
		t.Errorf("after late rearm: %v, want REARM", st)
	}
}

func TestManyPairsAndLoopModify(t *testing.T) {
	p := Start(t, "lab-pair", "--pairs", "3", "--duration", "1m")
	if ready := p.Ready(t, 6); len(ready) != 6 {
		t.Fatalf("want 6 ready lines, got %d", len(ready))
	}
	ls := MustRun(t, "lab-pair", "--loop-modify", "2000")
	b := Filter(ls, Match("bench", "loop_modify"))
	if len(b) != 1 || b[0].Int("modifies") != 2000 || b[0].Int("failed") != 0 || b[0].Int("per_second") <= 0 {
		t.Fatalf("loop-modify: %v", b)
	}
	t.Logf("RTS->RTS PATH_MIG_STATE modifies: %s/s", b[0].Str("per_second"))
}

// migrateRearmed runs a lab-pair that rearms at once, migrates its rxe0 QP
// n times (each rearm seen before the next migration), stops the pair and
// returns that QP's number.
func migrateRearmed(t *testing.T, n int) int64 {
	t.Helper()
	p, ready := startPair(t, "--behavior", "rearm")
	q := QPN(t, ready, "rxe0")
	from := 0
	for range n {
		Inject(t, "rxe0", q, "path_mig", true)
		_, from = p.Wait(t, from, evTimeout, Match("query", "after_react", "qpn", q))
	}
	p.Stop(t)
	return q
}
