package actuator

import (
	"context"
	"testing"

	"github.com/apmwatch/apmwatch/apm"
	"time"
)

// A storm larger than the rate limit is paced, never abandoned: every QP
// is acted on exactly once, at most Max in any period, none skipped.
func TestRateLimitPacesAStorm(t *testing.T) {
	const qps, max = 200, 50
	p := enforcePolicy()
	p.RateLimit = RateLimit{Max: max, Per: Duration(time.Second), OwnerMax: max}
	e, fd, c := newTestEnforcer(p)
	acted := map[uint32]int{}
	var stamps []time.Time
	take := func(out []apm.Finding) {
		for _, f := range out {
			if f.Kind != KindActuated {
				t.Fatalf("%s for qp %d: %s", f.Kind, f.QP.QPN, f.Explanation)
			}
			acted[f.QP.QPN]++
			stamps = append(stamps, c.wall)
		}
	}
	for q := uint32(100); q < 100+qps; q++ {
		e.Observe(pathMig(c.boot, q))
		take(e.Act(context.Background(), missed(q, uint64(q), c.boot)))
	}
	for i := 0; i < 100 && len(acted) < qps; i++ {
		c.advance(100 * time.Millisecond)
		take(e.Tick(context.Background(), c.wall))
	}
	if len(acted) != qps || len(fd.reqs) != qps {
		t.Fatalf("%d QPs acted on (%d requests), want %d", len(acted), len(fd.reqs), qps)
	}
	for q, n := range acted {
		if n != 1 {
			t.Errorf("qp %d acted on %d times", q, n)
		}
	}
	for i := max; i < len(stamps); i++ {
		if d := stamps[i].Sub(stamps[i-max]); d < time.Second {
			t.Fatalf("actions %d and %d %v apart: more than %d in a second", i-max, i, d, max)
		}
	}
	if last := stamps[len(stamps)-1].Sub(stamps[0]); last > time.Duration(qps/max)*time.Second {
		t.Errorf("the last action %v after the first: the limit allows %d a second", last, max)
	}
	if st := e.Stats(); st.Skipped != 0 || st.Deferred == 0 {
		t.Errorf("stats %+v", st)
	}
}

// A process whose many QPs fell due first does not hold another process's
// QP back: under a limit of one action a period, the other process's QP
// is acted on in the second period (one turn of each process), not after
// every QP of the first.
func TestFairTurnsAcrossProcesses(t *testing.T) {
	p := enforcePolicy()
	p.RateLimit = RateLimit{Max: 1, Per: Duration(time.Minute)}
	e, _, c := newTestEnforcer(p)
	pidOf := func(q uint32) uint32 {
		if q == 200 {
			return 43
		}
		return 42
	}
	e.Owner = func(_ string, q uint32) (Owner, error) {
		return Owner{PID: pidOf(q), Comm: "lab-pair", Start: 5}, nil
	}
	var order []uint32
	take := func(out []apm.Finding) {
		for _, f := range out {
			if f.Kind != KindActuated {
				t.Fatalf("%s for qp %d: %s", f.Kind, f.QP.QPN, f.Explanation)
			}
			order = append(order, f.QP.QPN)
		}
	}
	for _, q := range []uint32{100, 101, 102, 103, 104, 105, 200} {
		e.Observe(pathMig(c.boot, q))
		f := missed(q, uint64(q), c.boot)
		f.PID = pidOf(q)
		take(e.Act(context.Background(), f))
		c.advance(time.Millisecond)
	}
	for i := 0; i < 100 && len(order) < 7; i++ {
		due, ok := e.NextDue()
		if !ok {
			t.Fatalf("%d actions waiting and none due", 7-len(order))
		}
		if d := due.Sub(c.wall); d > 0 {
			c.advance(d)
		}
		take(e.Tick(context.Background(), c.wall))
	}
	if len(order) != 7 {
		t.Fatalf("acted on %v, want 7 QPs", order)
	}
	if order[0] != 100 || order[1] != 200 {
		t.Fatalf("order %v: the other process's qp 200 waited behind the first process's QPs, want it second", order)
	}
	for i, q := range append([]uint32{100}, order[2:]...) {
		if q != uint32(100+i) {
			t.Fatalf("order %v: the first process's QPs out of order", order)
		}
	}
}
