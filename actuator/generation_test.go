package actuator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
)

func lifeEv(kind event.Kind, boot uint64, qpn, pid uint32) *event.Event {
	return &event.Event{Kind: kind, Boot: boot, PID: pid, Device: "rxe0", QPN: qpn,
		Life: &event.QPLife{QPType: event.QPTypeRC, Origin: event.OriginUser}}
}

func truthEv(op event.TruthOp, boot uint64, qpn, pid uint32, mig event.MigState) *event.Event {
	return &event.Event{Kind: event.KindTruth, Boot: boot, PID: pid, Device: "rxe0", QPN: qpn,
		Truth: &event.Truth{Op: op, Source: "netlink", QPType: event.QPTypeRC, Origin: event.OriginUser, State: event.StateRTS, HasState: true, Mig: mig}}
}

func rearmEv(boot uint64, qpn uint32) *event.Event {
	return &event.Event{Kind: event.KindModify, Boot: boot, PID: 42, Device: "rxe0", QPN: qpn,
		Modify: &event.Modify{Origin: event.OriginUser, UHandle: 7, AttrMask: event.AttrPathMigState, MigState: event.MigRearm}}
}

// graceEnforcer has a 5 s grace; QP 17 of pid 42 (known from a netlink
// reading) migrated and its missed-rearm is pending.
func graceEnforcer(t *testing.T) (*Enforcer, *fakeDo, *clock, apm.Finding) {
	t.Helper()
	p := enforcePolicy()
	p.Grace = Duration(5 * time.Second)
	e, fd, c := newTestEnforcer(p)
	e.Observe(lifeEv(event.KindQPCreate, c.boot, 17, 42))
	e.Observe(truthEv(event.TruthRead, c.boot+1, 17, 42, event.MigArmed))
	mig := c.boot + uint64(time.Second)
	e.Observe(pathMig(mig, 17))
	c.advance(2 * time.Second)
	f := missed(17, 9, mig)
	if out := e.Act(context.Background(), f); len(out) != 0 {
		t.Fatalf("acted during the grace: %+v", out)
	}
	return e, fd, c, f
}

// afterGrace runs the enforcer past the grace and wants no request and no
// finding: the pending action was dropped.
func afterGrace(t *testing.T, e *Enforcer, fd *fakeDo, c *clock) {
	t.Helper()
	c.advance(10 * time.Second)
	if out := e.Tick(context.Background(), c.wall); len(out) != 0 || len(fd.reqs) != 0 {
		t.Fatalf("after the grace: findings %+v, requests %+v; want the action dropped", out, fd.reqs)
	}
	if s := e.Stats(); s.Dropped != 1 || s.Failed != 0 || s.Skipped != 0 || s.Actuated != 0 {
		t.Fatalf("stats %+v, want one dropped", s)
	}
}

// The QP is destroyed during the grace and another process's new QP gets
// its number: the new QP is not touched.
func TestPendingDroppedWhenQPNReused(t *testing.T) {
	e, fd, c, _ := graceEnforcer(t)
	c.advance(time.Second)
	e.Observe(lifeEv(event.KindQPDestroy, c.boot, 17, 42))
	c.advance(time.Millisecond)
	e.Observe(lifeEv(event.KindQPCreate, c.boot, 17, 43))
	e.Observe(modifyEv(c.boot+1, 17, nil, nil))
	e.Owner = func(string, uint32) (Owner, error) { return Owner{PID: 43, Comm: "lab-pair"}, nil }
	afterGrace(t, e, fd, c)
}

// The same with the destroy and create lost: a netlink reading names
// another owner for the QPN.
func TestPendingDroppedWhenReadingNamesAnotherOwner(t *testing.T) {
	e, fd, c, _ := graceEnforcer(t)
	c.advance(time.Second)
	e.Observe(truthEv(event.TruthRead, c.boot, 17, 43, event.MigArmed))
	e.Owner = func(string, uint32) (Owner, error) { return Owner{PID: 43, Comm: "lab-pair"}, nil }
	afterGrace(t, e, fd, c)
}

// Nothing seen at all (events lost, no reading yet): rdma netlink names
// another owner right before acting.
func TestPendingDroppedWhenOwnerChangedAtActTime(t *testing.T) {
	e, fd, c, _ := graceEnforcer(t)
	e.Owner = func(string, uint32) (Owner, error) { return Owner{PID: 43, Comm: "lab-pair"}, nil }
	afterGrace(t, e, fd, c)
}

// Gone from rdma netlink (a destroy the probes did not see).
func TestPendingDroppedWhenGone(t *testing.T) {
	e, fd, c, _ := graceEnforcer(t)
	c.advance(time.Second)
	e.Observe(truthEv(event.TruthGone, c.boot, 17, 0, 0))
	afterGrace(t, e, fd, c)
}

// The owner rearms during the grace: the model resolves the finding, and
// nothing ends as a false actuation-failed.
func TestPendingDroppedWhenResolved(t *testing.T) {
	e, fd, c, f := graceEnforcer(t)
	c.advance(time.Second)
	e.Resolve(apm.Finding{ID: 12, Kind: apm.MissedRearm, QP: f.QP, Resolved: true, Resolves: 99})
	if len(e.pending) != 1 {
		t.Fatal("a resolution of another finding dropped the action")
	}
	e.Resolve(apm.Finding{ID: 13, Kind: apm.MissedRearm, QP: f.QP, Resolved: true, Resolves: f.ID})
	afterGrace(t, e, fd, c)
}

// The rearm itself, seen before the model's resolution (the model waits
// for its reorder window), drops it too.
func TestPendingDroppedWhenRearmSeen(t *testing.T) {
	e, fd, c, _ := graceEnforcer(t)
	c.advance(time.Second)
	e.Observe(rearmEv(c.boot, 17))
	afterGrace(t, e, fd, c)
}

// The finding comes after the destroy was delivered (events reach the
// enforcer before the model judges them): dropped at once.
func TestFindingAfterDestroyDropped(t *testing.T) {
	e, fd, c := newTestEnforcer(enforcePolicy())
	mig := c.boot
	e.Observe(pathMig(mig, 17))
	c.advance(time.Second)
	e.Observe(lifeEv(event.KindQPDestroy, c.boot, 17, 42))
	e.Observe(lifeEv(event.KindQPCreate, c.boot+1, 17, 43))
	if out := e.Act(context.Background(), missed(17, 1, mig)); len(out) != 0 || len(fd.reqs) != 0 || e.Stats().Dropped != 1 {
		t.Fatalf("finding on a destroyed generation: %+v, requests %+v, stats %+v", out, fd.reqs, e.Stats())
	}
	// A destroy of the old generation delivered late does not end the new one.
	e.Observe(lifeEv(event.KindQPDestroy, c.boot-1, 17, 42))
	mig2 := c.boot + 2
	e.Observe(pathMig(mig2, 17))
	e.Owner = func(string, uint32) (Owner, error) { return Owner{PID: 43, Comm: "lab-pair"}, nil }
	if out := e.Act(context.Background(), missed(17, 2, mig2)); len(out) != 1 || out[0].Kind != KindActuated {
		t.Fatalf("the new generation's own finding: %+v", out)
	}
}

// The owner rearmed after the last event the enforcer saw: the check reads
// REARM and nothing is sent; that is no failure.
func TestAlreadyRearmedIsSkippedNotFailed(t *testing.T) {
	e, fd, c := newTestEnforcer(enforcePolicy())
	e.Observe(pathMig(c.boot, 17))
	fd.errs = []error{fmt.Errorf("%w: qp 17 is REARM, rearm needs MIGRATED", ErrWrongState)}
	fd.before = &Attr{State: 3, PathMigState: uint8(event.MigRearm)}
	out := e.Act(context.Background(), missed(17, 1, c.boot))
	if len(out) != 1 || out[0].Kind != KindActuationSkip || !strings.Contains(out[0].Explanation, "rearmed by its owner") {
		t.Fatalf("%+v", out)
	}
	// A check that fails on a QP still MIGRATED is a failure.
	e, fd, c = newTestEnforcer(enforcePolicy())
	e.Observe(pathMig(c.boot, 17))
	fd.errs = []error{fmt.Errorf("%w: qp 17 changed while it was checked", ErrWrongState)}
	if out := e.Act(context.Background(), missed(17, 1, c.boot)); len(out) != 1 || out[0].Kind != KindActuationError {
		t.Fatalf("%+v", out)
	}
}

// One owner's QPs cannot use up the global budget; the owner's start time
// reaches the actuator.
func TestRateLimitPerOwner(t *testing.T) {
	p := enforcePolicy()
	p.RateLimit = RateLimit{Max: 3, Per: Duration(time.Minute), OwnerMax: 1}
	e, fd, c := newTestEnforcer(p)
	e.Owner = func(_ string, q uint32) (Owner, error) {
		if q == 30 {
			return Owner{PID: 50, Comm: "lab-pair", Start: 777}, nil
		}
		return Owner{PID: 42, Comm: "lab-pair", Start: 555}, nil
	}
	kinds := map[uint32]apm.Kind{}
	for i, q := range []uint32{17, 18, 30} {
		e.Observe(pathMig(c.boot, q))
		for _, f := range e.Act(context.Background(), missed(q, uint64(i+1), c.boot)) {
			kinds[f.QP.QPN] = f.Kind
		}
	}
	if kinds[17] != KindActuated || kinds[30] != KindActuated || len(kinds) != 2 {
		t.Fatalf("kinds %v: want pid 42's second qp waiting, pid 50's acted on", kinds)
	}
	if len(fd.reqs) != 2 || fd.reqs[0].Start != 555 || fd.reqs[1].Start != 777 {
		t.Errorf("requests %+v: want the owners' start times", fd.reqs)
	}
	// pid 42's second QP waits for the owner's limit, not for ever: its turn
	// comes a period after pid 42's first action.
	c.advance(time.Minute - time.Second)
	if out := e.Tick(context.Background(), c.wall); len(out) != 0 {
		t.Fatalf("acted before the owner's period ended: %+v", out)
	}
	c.advance(time.Second)
	if out := e.Tick(context.Background(), c.wall); len(out) != 1 || out[0].QP.QPN != 18 || out[0].Kind != KindActuated {
		t.Fatalf("qp 18 after the period: %+v", out)
	}
	if st := e.Stats(); st.Deferred == 0 || st.Skipped != 0 {
		t.Errorf("stats %+v: want deferrals, no skip", st)
	}
	// The default per-owner limit is half of max.
	if (RateLimit{Max: 5}).ownerMax() != 3 || (RateLimit{Max: 1}).ownerMax() != 1 {
		t.Error("default owner_max")
	}
}
