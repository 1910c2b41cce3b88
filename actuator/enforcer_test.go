package actuator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
)

type fakeDo struct {
	mu     sync.Mutex // the enforcer runs actions side by side
	reqs   []Request
	errs   []error // popped per call; nil: success
	before *Attr   // the QP as checked (default RTS, MIGRATED)
}

func (f *fakeDo) do(_ context.Context, r Request) (*Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, r)
	var err error
	if len(f.errs) > 0 {
		err, f.errs = f.errs[0], f.errs[1:]
	}
	res := &Result{Op: r.Op, DryRun: r.DryRun, Target: Target{Handle: 2, How: "probes"},
		Before: &Attr{State: 3, PathMigState: 0}}
	if f.before != nil {
		res.Before = f.before
	}
	if err == nil && !r.DryRun {
		res.After = &Attr{State: 3, PathMigState: 1}
		res.Changes = []string{"path_mig_state: MIGRATED -> REARM"}
	}
	return res, err
}

type clock struct {
	wall time.Time
	boot uint64
}

func (c *clock) advance(d time.Duration) { c.wall = c.wall.Add(d); c.boot += uint64(d) }

func newTestEnforcer(p Policy) (*Enforcer, *fakeDo, *clock) {
	fd := &fakeDo{}
	c := &clock{wall: time.Unix(1000, 0), boot: uint64(50 * time.Second)}
	e := &Enforcer{Policy: p, Do: fd.do, Boot: func() uint64 { return c.boot }, Now: func() time.Time { return c.wall },
		PortState: func(string, uint8) string { return "ACTIVE" },
		Owner: func(d string, q uint32) (Owner, error) {
			if q == 19 {
				return Owner{PID: 43, Comm: "other"}, nil
			}
			if q == 20 {
				return Owner{Comm: "rpcrdma", Kernel: true}, nil
			}
			return Owner{PID: 42, Comm: "lab-pair"}, nil
		}}
	return e, fd, c
}

func enforcePolicy() Policy {
	p := DefaultPolicy()
	p.Mode = ModeEnforce
	p.Allow.Comms = []string{"lab-pair"}
	p.RateLimit = RateLimit{Max: 10, Per: Duration(time.Minute)}
	p.RearmWithoutAlternate = true
	return p
}

func modifyEv(boot uint64, qpn uint32, prim, alt *event.Path) *event.Event {
	return &event.Event{Kind: event.KindModify, Boot: boot, PID: 42, Comm: "lab-pair", Device: "rxe0", QPN: qpn,
		Modify: &event.Modify{Origin: event.OriginUser, UHandle: 7, Primary: prim, Alt: alt, AttrMask: event.AttrPathMigState}}
}

func pathMig(boot uint64, qpn uint32) *event.Event {
	return &event.Event{Kind: event.KindQPEvent, Boot: boot, PID: 42, Device: "rxe0", QPN: qpn, QP: &event.QPEvent{Type: event.EvPathMig}}
}

func missed(qpn uint32, id uint64, first uint64) apm.Finding {
	return apm.Finding{ID: id, Kind: apm.MissedRearm, QP: apm.Key{Device: "rxe0", QPN: qpn, Gen: 1}, PID: 42, Comm: "lab-pair", First: first, Last: first + 1}
}

func TestEnforceRearmsAtOnceWithZeroGrace(t *testing.T) {
	e, fd, c := newTestEnforcer(enforcePolicy())
	e.Observe(modifyEv(c.boot, 17, nil, nil))
	mig := c.boot + uint64(time.Second)
	e.Observe(pathMig(mig, 17))
	c.advance(3 * time.Second)
	out := e.Act(context.Background(), missed(17, 9, mig))
	if len(out) != 1 || out[0].Kind != KindActuated {
		t.Fatalf("findings %+v, want one actuated", out)
	}
	if len(fd.reqs) != 1 || fd.reqs[0].Op != OpRearm || fd.reqs[0].DryRun || fd.reqs[0].Alt != nil {
		t.Fatalf("requests %+v, want one rearm without alternate", fd.reqs)
	}
	if !fd.reqs[0].HaveHandle || fd.reqs[0].Handle != 7 {
		t.Errorf("the handle seen by the probes was not passed: %+v", fd.reqs[0])
	}
	if out[0].Unprotected != 2*time.Second {
		t.Errorf("unprotected %v, want 2s (PATH_MIG to verified rearm)", out[0].Unprotected)
	}
	if s := fmt.Sprint(out[0].Evidence); !strings.Contains(s, "MIGRATED -> REARM") || !strings.Contains(s, "before:") ||
		!strings.Contains(s, " path port ") || !strings.Contains(s, " alternate port ") {
		t.Errorf("evidence lacks before/after: %s", s)
	}
	// Never the same QP twice in a row without a new migration.
	out = e.Act(context.Background(), missed(17, 10, mig))
	if len(out) != 1 || out[0].Kind != KindActuationSkip || !strings.Contains(out[0].Explanation, "never twice") || len(fd.reqs) != 1 {
		t.Errorf("second act: %+v (requests %d)", out, len(fd.reqs))
	}
	e.Observe(pathMig(c.boot, 17))
	if out = e.Act(context.Background(), missed(17, 11, c.boot)); len(out) != 1 || out[0].Kind != KindActuated || len(fd.reqs) != 2 {
		t.Errorf("after a new migration: %+v (requests %d)", out, len(fd.reqs))
	}
	if s := e.Stats(); s.Actuated != 2 || s.Skipped != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestMonitorModeSendsNothing(t *testing.T) {
	p := enforcePolicy()
	p.Mode = ModeMonitor
	e, fd, _ := newTestEnforcer(p)
	e.Observe(pathMig(1, 17))
	out := e.Act(context.Background(), missed(17, 1, 1))
	if len(out) != 1 || out[0].Kind != KindWouldActuate || len(fd.reqs) != 1 || !fd.reqs[0].DryRun {
		t.Fatalf("monitor: %+v, requests %+v", out, fd.reqs)
	}
	// Monitor mode does not consume the QP's one action.
	if out = e.Act(context.Background(), missed(17, 2, 1)); len(out) != 1 || out[0].Kind != KindWouldActuate {
		t.Errorf("monitor again: %+v", out)
	}
}

func TestGraceRateLimitAllowlist(t *testing.T) {
	p := enforcePolicy()
	p.Grace = Duration(5 * time.Second)
	p.RateLimit = RateLimit{Max: 1, Per: Duration(time.Minute)}
	e, fd, c := newTestEnforcer(p)
	for _, q := range []uint32{17, 18, 19, 20} {
		e.Observe(pathMig(1, q))
	}
	if due, ok := e.NextDue(); ok {
		t.Fatalf("due with nothing pending: %v", due)
	}
	if out := e.Act(context.Background(), missed(17, 1, 1)); len(out) != 0 || len(fd.reqs) != 0 {
		t.Fatalf("acted before the grace period: %+v", out)
	}
	if due, ok := e.NextDue(); !ok || !due.Equal(c.wall.Add(5*time.Second)) {
		t.Fatalf("NextDue = %v, %v; want the end of the grace period %v", due, ok, c.wall.Add(5*time.Second))
	}
	c.advance(4 * time.Second)
	if out := e.Tick(context.Background(), c.wall); len(out) != 0 {
		t.Fatalf("acted 1s before the grace period ended: %+v", out)
	}
	c.advance(time.Second)
	if out := e.Tick(context.Background(), c.wall); len(out) != 1 || out[0].Kind != KindActuated {
		t.Fatalf("after the grace period: %+v", out)
	}
	if due, ok := e.NextDue(); ok {
		t.Fatalf("due after the action: %v", due)
	}
	// A second QP within the minute: it waits for the rate limit (a storm
	// is paced, never abandoned), and is acted on once the minute is over.
	e.Act(context.Background(), missed(18, 2, 1))
	c.advance(5 * time.Second)
	if out := e.Tick(context.Background(), c.wall); len(out) != 0 || len(fd.reqs) != 1 {
		t.Fatalf("acted beyond the rate limit: %+v", out)
	}
	c.advance(55 * time.Second) // the first action was at 5 s
	if out := e.Tick(context.Background(), c.wall); len(out) != 1 || out[0].Kind != KindActuated || out[0].QP.QPN != 18 {
		t.Fatalf("the deferred action after the minute: %+v", out)
	}
	// Not on the allowlist (the owner from netlink, not the finding's
	// comm, which is whoever touched the QP last): skipped, no request.
	f := missed(19, 3, 1)
	f.Comm = "lab-pair"
	c.advance(time.Hour)
	e.Act(context.Background(), f)
	c.advance(5 * time.Second)
	if out := e.Tick(context.Background(), c.wall); len(out) != 1 || !strings.Contains(out[0].Explanation, "allow.comms") {
		t.Fatalf("allowlist: %+v", out)
	}
	// A kernel ULP QP: reported, never tried.
	e.Act(context.Background(), missed(20, 4, 1))
	c.advance(5 * time.Second)
	if out := e.Tick(context.Background(), c.wall); len(out) != 1 || !strings.Contains(out[0].Explanation, "kernel ulp qp") {
		t.Fatalf("kernel qp: %+v", out)
	}
	if len(fd.reqs) != 2 {
		t.Errorf("%d requests, want 2", len(fd.reqs))
	}
	// Other finding kinds are not acted on.
	if out := e.Act(context.Background(), apm.Finding{Kind: apm.LAPRace}); out != nil {
		t.Errorf("acted on lap-race: %+v", out)
	}
}

// The previous primary, reloaded as the alternate, keeps its source path
// bits: an LMC path reloaded without them would send from the port's base
// LID, and the peer, checking the SLID, would drop every packet after the
// next migration.
func TestPreviousPrimaryKeepsItsPathBits(t *testing.T) {
	p := enforcePolicy()
	p.PreviousPrimary = true
	e, fd, c := newTestEnforcer(p)
	e.Observe(modifyEv(c.boot, 17, &event.Path{Port: 1, DLID: 5, SrcPathBits: 1}, &event.Path{Port: 1, DLID: 4}))
	e.Observe(pathMig(c.boot, 17))
	e.Act(context.Background(), missed(17, 1, c.boot))
	if len(fd.reqs) == 0 || fd.reqs[0].Alt == nil || fd.reqs[0].Alt.Dest.DLID != 5 || fd.reqs[0].Alt.Dest.SrcPathBits != 1 {
		t.Fatalf("want the previous primary (port 1, dlid 5, path bits 1) as alternate: %+v", fd.reqs)
	}
}

func TestAlternateChoiceAndRoCEFallback(t *testing.T) {
	p := enforcePolicy()
	p.PreviousPrimary = true
	e, fd, c := newTestEnforcer(p)
	prim := &event.Path{Port: 1, DLID: 5}
	alt := &event.Path{Port: 2, DLID: 6}
	e.Observe(modifyEv(c.boot, 17, prim, alt))
	e.Observe(pathMig(c.boot, 17))
	fd.errs = []error{fmt.Errorf("%w: rxe0 port 1 refused", ErrRoCE)}
	out := e.Act(context.Background(), missed(17, 1, c.boot))
	if len(fd.reqs) != 2 || fd.reqs[0].Alt == nil || fd.reqs[0].Alt.Port != 1 || fd.reqs[0].Alt.Dest.DLID != 5 || fd.reqs[1].Alt != nil {
		t.Fatalf("want the previous primary (port 1, dlid 5) as alternate, then a plain rearm: %+v", fd.reqs)
	}
	if len(out) != 1 || out[0].Kind != KindActuated || !strings.Contains(out[0].Explanation, "without a new alternate") {
		t.Errorf("RoCE fallback: %+v", out)
	}

	// Without the fallback the refusal is a failure, and a down port
	// means no alternate at all.
	p.RearmWithoutAlternate = false
	e, fd, c = newTestEnforcer(p)
	e.Observe(modifyEv(c.boot, 17, prim, alt))
	e.Observe(pathMig(c.boot, 17))
	fd.errs = []error{fmt.Errorf("%w: refused", ErrRoCE)}
	if out := e.Act(context.Background(), missed(17, 1, c.boot)); len(out) != 1 || out[0].Kind != KindActuationError || len(fd.reqs) != 1 {
		t.Errorf("refused without fallback: %+v", out)
	}
	e.PortState = func(string, uint8) string { return "DOWN" }
	e.Observe(pathMig(c.boot, 17))
	if out := e.Act(context.Background(), missed(17, 2, c.boot)); len(out) != 1 || out[0].Kind != KindActuationSkip || !strings.Contains(out[0].Explanation, "DOWN") {
		t.Errorf("port down: %+v", out)
	}

	// The configured table wins over the previous primary.
	p.Alternates = []AltRule{{Device: "rxe0", Alt: AltSpec{Port: 1, DLID: 99}}}
	e, fd, c = newTestEnforcer(p)
	e.Observe(modifyEv(c.boot, 17, prim, alt))
	e.Observe(pathMig(c.boot, 17))
	e.Act(context.Background(), missed(17, 1, c.boot))
	if len(fd.reqs) != 1 || fd.reqs[0].Alt == nil || fd.reqs[0].Alt.Dest.DLID != 99 {
		t.Errorf("table alternate: %+v", fd.reqs)
	}
}

// On a RoCE port the kernel refuses every alternate path: the enforcer does
// not send one, rearms alone when the policy allows, and skips otherwise.
func TestRoCEAlternateNotSent(t *testing.T) {
	p := enforcePolicy()
	p.PreviousPrimary = true
	prim := &event.Path{Port: 1, DLID: 5}
	alt := &event.Path{Port: 2, DLID: 6}
	for _, without := range []bool{true, false} {
		p.RearmWithoutAlternate = without
		e, fd, c := newTestEnforcer(p)
		var asked []uint8
		e.LinkLayer = func(dev string, port uint8) string { asked = append(asked, port); return "Ethernet" }
		e.Observe(modifyEv(c.boot, 17, prim, alt))
		e.Observe(pathMig(c.boot, 17))
		out := e.Act(context.Background(), missed(17, 1, c.boot))
		if len(asked) != 1 || asked[0] != 1 {
			t.Errorf("link layer asked of ports %v, want the new alternate's (1)", asked)
		}
		switch {
		case without && (len(fd.reqs) != 1 || fd.reqs[0].Alt != nil || len(out) != 1 || out[0].Kind != KindActuated ||
			!strings.Contains(out[0].Explanation, "is not sent: port 1 is RoCE")):
			t.Errorf("rearm alone: requests %+v, findings %+v", fd.reqs, out)
		case !without && (len(fd.reqs) != 0 || len(out) != 1 || out[0].Kind != KindActuationSkip ||
			!strings.Contains(out[0].Explanation, "APM is InfiniBand-only")):
			t.Errorf("skipped: requests %+v, findings %+v", fd.reqs, out)
		}
	}
	// On InfiniBand the alternate is sent; the operation starts from the
	// netlink row the owner was read from.
	p.RearmWithoutAlternate = true
	e, fd, c := newTestEnforcer(p)
	e.LinkLayer = func(string, uint8) string { return "InfiniBand" }
	e.Owner = func(d string, q uint32) (Owner, error) {
		return Owner{PID: 42, Comm: "lab-pair", Row: rdmanl.QP{Device: d, LQPN: q, PID: 42}}, nil
	}
	e.Observe(modifyEv(c.boot, 17, prim, alt))
	e.Observe(pathMig(c.boot, 17))
	e.Act(context.Background(), missed(17, 1, c.boot))
	if len(fd.reqs) != 1 || fd.reqs[0].Alt == nil || fd.reqs[0].Alt.Dest.DLID != 5 {
		t.Errorf("infiniband: %+v", fd.reqs)
	} else if r := fd.reqs[0].Row; r == nil || r.LQPN != 17 || r.Device != "rxe0" {
		t.Errorf("the owner's row not handed on: %+v", r)
	}
}

// Actions that fall due together run side by side (up to Parallel), each
// QP's own; their findings come in the order they fell due.
func TestActionsDueTogetherRunSideBySide(t *testing.T) {
	for _, parallel := range []int{1, 3} {
		p := enforcePolicy()
		p.Grace = Duration(time.Second)
		e, fd, c := newTestEnforcer(p)
		e.Parallel = parallel
		qpns := []uint32{21, 22, 23, 24}
		want := min(parallel, len(qpns))
		var mu sync.Mutex
		inside, started, most := 0, 0, 0
		do := e.Do
		e.Do = func(ctx context.Context, r Request) (*Result, error) {
			mu.Lock()
			inside++
			started++
			most = max(most, inside)
			first := started <= want
			mu.Unlock()
			// The first ones wait (up to 5 s) until all that may run at
			// once were inside together: serial actions never get there.
			for end := time.Now().Add(5 * time.Second); first && time.Now().Before(end); time.Sleep(time.Millisecond) {
				mu.Lock()
				n := most
				mu.Unlock()
				if n >= want {
					break
				}
			}
			mu.Lock()
			inside--
			mu.Unlock()
			return do(ctx, r)
		}
		for i, q := range qpns {
			e.Observe(modifyEv(c.boot, q, nil, nil))
			e.Observe(pathMig(c.boot, q))
			e.Act(context.Background(), missed(q, uint64(i+1), c.boot))
		}
		c.advance(2 * time.Second)
		out := e.Tick(context.Background(), c.wall)
		if len(out) != len(qpns) || len(fd.reqs) != len(qpns) {
			t.Fatalf("parallel %d: %d findings, %d requests, want %d", parallel, len(out), len(fd.reqs), len(qpns))
		}
		for i, f := range out {
			if f.Kind != KindActuated || f.QP.QPN != qpns[i] {
				t.Errorf("parallel %d: finding %d is %s of qp %d, want actuated of %d", parallel, i, f.Kind, f.QP.QPN, qpns[i])
			}
		}
		if most != want {
			t.Errorf("parallel %d: at most %d actions at once, want %d", parallel, most, want)
		}
	}
}

// In the background Act returns at once; Done says when the action
// finished and Collect has its finding. A second finding on the QP while
// its action runs waits for it (never two at once on one QP) and is not
// due meanwhile (NextDue), then runs: skipped, as acted already.
func TestBackgroundActions(t *testing.T) {
	p := enforcePolicy()
	e, fd, c := newTestEnforcer(p)
	e.Background = true
	release := make(chan struct{})
	do := e.Do
	e.Do = func(ctx context.Context, r Request) (*Result, error) {
		<-release
		return do(ctx, r)
	}
	e.Observe(modifyEv(c.boot, 17, nil, nil))
	e.Observe(pathMig(c.boot, 17))
	if out := e.Act(context.Background(), missed(17, 1, c.boot)); out != nil {
		t.Fatalf("Act returned %+v before the action finished", out)
	}
	// Events keep coming while the action waits.
	e.Observe(modifyEv(c.boot+1, 18, nil, nil))
	if out := e.Act(context.Background(), missed(17, 2, c.boot)); out != nil {
		t.Fatalf("second Act: %+v", out)
	}
	if due, ok := e.NextDue(); ok {
		t.Fatalf("due at %v while the QP's action runs", due)
	}
	close(release)
	select {
	case <-e.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not readable after the action finished")
	}
	out := e.Collect()
	if len(out) != 1 || out[0].Kind != KindActuated || out[0].QP.QPN != 17 {
		t.Fatalf("collected %+v", out)
	}
	due, ok := e.NextDue()
	if !ok {
		t.Fatal("the second finding's action is not due once the first finished")
	}
	e.Tick(context.Background(), due)
	e.Wait()
	if out := e.Collect(); len(out) != 1 || out[0].Kind != KindActuationSkip || !strings.Contains(out[0].Explanation, "already actuated") {
		t.Fatalf("second action: %+v", out)
	}
	if len(fd.reqs) != 1 {
		t.Errorf("%d operations, want 1", len(fd.reqs))
	}
}

// An action still waiting for its turn when the context ends is dropped,
// not run against a stopping daemon (and reported as failed).
func TestActionsDroppedWhenStopping(t *testing.T) {
	e, fd, c := newTestEnforcer(enforcePolicy())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.Observe(modifyEv(c.boot, 17, nil, nil))
	e.Observe(pathMig(c.boot, 17))
	if out := e.Act(ctx, missed(17, 1, c.boot)); len(out) != 0 || len(fd.reqs) != 0 || e.Stats().Dropped != 1 {
		t.Errorf("findings %+v, %d operations, stats %+v: want the action dropped", out, len(fd.reqs), e.Stats())
	}
}
