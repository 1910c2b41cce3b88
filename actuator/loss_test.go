package actuator

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// The ring buffer drops the destroy of QP 17 and the create of another
// user's QP 17 before the owner was ever read: the enforcer cannot tell
// the new QP from the judged one, so an action about a migration before
// the loss is dropped (logged, counted), never run on whoever owns the
// number now. A migration after the loss is acted on.
func TestEventsLostSinceMigration(t *testing.T) {
	setup := func() (*Enforcer, *fakeDo, *clock, *[]string) {
		p := enforcePolicy()
		p.Grace = Duration(5 * time.Second)
		e, fd, c := newTestEnforcer(p)
		var logged []string
		e.Log = func(msg string, args ...any) { logged = append(logged, fmt.Sprint(msg, args)) }
		return e, fd, c, &logged
	}
	stolen := func(string, uint32) (Owner, error) { return Owner{PID: 43, Comm: "lab-pair", Start: 9}, nil }
	ctx := context.Background()

	// Lost while the action waits out its grace.
	e, fd, c, logged := setup()
	e.Observe(lifeEv(event.KindQPCreate, c.boot, 17, 42))
	mig := c.boot + uint64(time.Second)
	e.Observe(pathMig(mig, 17))
	c.advance(2 * time.Second)
	e.Act(ctx, missed(17, 9, mig))
	c.advance(time.Second)
	e.Lost(c.boot)
	e.Owner = stolen
	c.advance(10 * time.Second)
	if out := e.Tick(ctx, c.wall); len(out) != 0 || len(fd.reqs) != 0 {
		t.Fatalf("events lost during the grace: findings %+v, requests %+v; want the action dropped", out, fd.reqs)
	}
	if s := e.Stats(); s.Dropped != 1 || s.DroppedLost != 1 {
		t.Errorf("stats %+v, want one dropped for lost events", s)
	}
	// and the metric says so (the audit daemon registers the enforcer's)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e.Metrics())
	fams, err := reg.Gather()
	if err != nil || len(fams) != 1 || fams[0].GetName() != "apmwatch_enforcer_actions_total" {
		t.Fatalf("gathered %v: %v", fams, err)
	}
	got := map[string]float64{}
	for _, m := range fams[0].GetMetric() {
		got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	if got["dropped"] != 1 || got["dropped-lost"] != 1 || got["actuated"] != 0 || len(got) != 7 {
		t.Errorf("apmwatch_enforcer_actions_total %v", got)
	}
	if l := strings.Join(*logged, "\n"); !strings.Contains(l, "pending action dropped") || !strings.Contains(l, "lost") {
		t.Errorf("log %q", l)
	}

	// The finding comes after the loss (the model waits for its reorder
	// window), about a migration before it; and an action waiting for the
	// rate limit when the loss is told.
	e, fd, c, _ = setup()
	e.Policy.Grace = 0
	e.Policy.RateLimit = RateLimit{Max: 1, Per: Duration(time.Minute)}
	for _, q := range []uint32{17, 18, 19} {
		e.Observe(lifeEv(event.KindQPCreate, c.boot, q, 42))
		e.Observe(pathMig(c.boot+1, q))
	}
	mig = c.boot + 1
	c.advance(time.Second)
	e.Act(ctx, missed(17, 1, mig)) // acted: the limit is used up
	e.Act(ctx, missed(18, 2, mig)) // waits for the limit
	e.Lost(0)                      // when the loss time is unknown: now
	e.Owner = stolen
	e.Act(ctx, missed(19, 3, mig))
	c.advance(2 * time.Minute)
	e.Tick(ctx, c.wall)
	if s := e.Stats(); len(fd.reqs) != 1 || fd.reqs[0].QPN != 17 || s.DroppedLost != 2 || s.Dropped != 2 {
		t.Errorf("requests %+v, stats %+v: want qp 17 acted before the loss, 18 and 19 dropped", fd.reqs, s)
	}
	if _, ok := e.NextDue(); ok {
		t.Error("a dropped action is still due")
	}

	// Lost before the migration: the finding judged what came after.
	e, fd, c, _ = setup()
	e.Policy.Grace = 0
	e.Lost(c.boot)
	c.advance(time.Second)
	e.Observe(pathMig(c.boot, 17))
	if out := e.Act(ctx, missed(17, 1, c.boot)); len(out) != 1 || out[0].Kind != KindActuated || e.Stats().DroppedLost != 0 {
		t.Errorf("loss before the migration: %+v, stats %+v", out, e.Stats())
	}
}
