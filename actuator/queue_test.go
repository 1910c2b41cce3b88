package actuator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
)

// A storm of 200 missed rearms on 200 QPs under a limit of 3 actions a
// second: the actions wait for the limit in one ordered queue and each
// owner lookup runs at its action's turn, so there are O(N) lookups (not
// one per waiting action at every freed slot), the actions run in the
// order they fell due (an owner over its own limit is overtaken, its own
// actions keep their order), none lost, none twice.
func TestAdmitInTurn(t *testing.T) {
	const qps, most = 200, 3
	for _, tc := range []struct {
		name     string
		ownerMax int
		pid      func(q uint32) uint32
	}{
		{"one owner per qp", 0, func(q uint32) uint32 { return 1000 + q }},
		{"three owners, one action each a period", 1, func(q uint32) uint32 { return 1000 + (q/7)%3 }},
	} {
		p := enforcePolicy()
		p.RateLimit = RateLimit{Max: most, Per: Duration(time.Second), OwnerMax: tc.ownerMax}
		e, fd, c := newTestEnforcer(p)
		var mu sync.Mutex
		lookups := 0
		e.Owner = func(_ string, q uint32) (Owner, error) {
			mu.Lock()
			defer mu.Unlock()
			lookups++
			return Owner{PID: tc.pid(q), Comm: "lab-pair", Start: 5}, nil
		}
		var order []uint32
		var stamps []time.Time
		take := func(out []apm.Finding) {
			for _, f := range out {
				if f.Kind != KindActuated {
					t.Fatalf("%s: %s for qp %d: %s", tc.name, f.Kind, f.QP.QPN, f.Explanation)
				}
				order = append(order, f.QP.QPN)
				stamps = append(stamps, c.wall)
			}
		}
		for q := uint32(100); q < 100+qps; q++ {
			e.Observe(pathMig(c.boot, q))
			take(e.Act(context.Background(), missed(q, uint64(q), c.boot)))
		}
		for i := 0; i < 10*qps && len(order) < qps; i++ {
			due, ok := e.NextDue()
			if !ok {
				t.Fatalf("%s: %d actions waiting and none due", tc.name, qps-len(order))
			}
			if d := due.Sub(c.wall); d > 0 {
				c.advance(d)
			}
			take(e.Tick(context.Background(), c.wall))
		}
		t.Logf("%s: %d owner lookups, %d deferrals", tc.name, lookups, e.Stats().Deferred)
		if lookups > 2*qps {
			t.Errorf("%s: %d owner lookups for %d actions, want at most %d", tc.name, lookups, qps, 2*qps)
		}
		if len(order) != qps || len(fd.reqs) != qps {
			t.Fatalf("%s: %d actions (%d requests), want %d", tc.name, len(order), len(fd.reqs), qps)
		}
		seen, last := map[uint32]bool{}, map[uint32]uint32{}
		for i, q := range order {
			if seen[q] {
				t.Fatalf("%s: qp %d acted on twice", tc.name, q)
			}
			seen[q] = true
			if tc.ownerMax == 0 && q != uint32(100+i) {
				t.Fatalf("%s: action %d on qp %d, want %d: out of order %v", tc.name, i, q, 100+i, order[max(0, i-3):i+1])
			}
			if o := tc.pid(q); last[o] > q {
				t.Fatalf("%s: qp %d of pid %d after its qp %d: out of order", tc.name, q, o, last[o])
			}
			last[tc.pid(q)] = q
		}
		for i := most; i < len(stamps); i++ {
			if d := stamps[i].Sub(stamps[i-most]); d < time.Second {
				t.Fatalf("%s: actions %d and %d %v apart: more than %d in a second", tc.name, i-most, i, d, most)
			}
		}
		if _, ok := e.NextDue(); ok {
			t.Errorf("%s: an action still due after all ran", tc.name)
		}
		if st := e.Stats(); st.Deferred == 0 || st.Dropped+st.Skipped+st.Failed != 0 {
			t.Errorf("%s: stats %+v", tc.name, st)
		}
	}
}
