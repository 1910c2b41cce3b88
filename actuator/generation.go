package actuator

import (
	"sync"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
)

// A QP number names one QP at a time: after a destroy the driver may give
// it to a new QP of another process. The enforcer therefore follows each
// QPN's generation from the event stream (creates, destroys, rdma netlink
// readings) and acts only while the generation a finding judged is the one
// alive. Events reach Observe before the model judges them (the model waits
// for its reorder window), so everything is compared by boot time, never by
// arrival order.

// qpTrack is what the enforcer knows of the live generation of one QPN.
type qpTrack struct {
	primary, alt, prev *event.Path
	acted              bool   // actuated since its last migration
	migratedAt         uint64 // boot ns of the last PATH_MIG
	// born is the boot time of the create that started this generation; 0
	// when it was first seen without its create (it existed before).
	born uint64
	// owner is the owner's pid from rdma netlink readings (0: none yet).
	owner uint32
	// rearmedAt is the boot time of the last rearm seen: a successful
	// modify to REARM, or a reading of REARM or ARMED.
	rearmedAt uint64
}

// pendingAct is a missed-rearm waiting for its grace period, then for its
// turn in the rate limit's queue, keyed by the QP generation the model
// judged.
type pendingAct struct {
	key   apm.Key
	f     apm.Finding
	since uint64 // boot ns of the migration the finding is about
	due   time.Time
	// seq is its place in the queue (in the order the actions fell due).
	seq uint64
	// owner is the owner (Owner.id) its last lookup found, "" before one:
	// the queue passes it over while that owner's limit is full.
	owner  string
	waited bool // counted in Deferred since it entered the queue
	// batch and nth: the turn of the queue that started it, its place.
	batch *batch
	nth   int
}

func (e *Enforcer) init() {
	if e.qps == nil {
		e.qps = map[event.QPKey]*qpTrack{}
		e.handles = NewHandles()
		e.inflight = map[event.QPKey]bool{}
		e.held = map[event.QPKey]string{}
		e.turn = sync.NewCond(&e.mu)
		n := e.Parallel
		if n <= 0 {
			n = DefaultParallel
		}
		e.slots = make(chan struct{}, n)
		e.doneC = make(chan struct{}, 1)
	}
}

// Observe follows the generations, paths, migrations and rearms of every
// QP and the handles of user QPs, and drops the pending actions whose
// generation ended or was rearmed. No I/O; it waits only for an action's
// steps between its I/O.
func (e *Enforcer) Observe(ev *event.Event) {
	if ev.QPN == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	e.handles.Observe(ev)
	k := ev.Key()
	t := e.qps[k]
	switch {
	case ev.Kind == event.KindQPCreate && (ev.Life == nil || ev.Life.Ret == 0):
		if t != nil && ev.Boot < t.born {
			return // an older create delivered late
		}
		e.qps[k] = &qpTrack{born: ev.Boot}
		e.dropEnded(k, ev.Boot, "a new qp took the number")
		return
	case ev.Kind == event.KindQPDestroy && (ev.Life == nil || ev.Life.Ret == 0),
		ev.Kind == event.KindTruth && ev.Truth != nil && ev.Truth.Op == event.TruthGone:
		if t != nil && ev.Boot < t.born {
			return // the end of an older generation, delivered late
		}
		delete(e.qps, k)
		e.dropEnded(k, ev.Boot, "the qp was destroyed")
		return
	}
	if t == nil {
		t = &qpTrack{}
		e.qps[k] = t
	}
	switch {
	case ev.Kind == event.KindTruth && ev.Truth != nil && ev.Truth.Op == event.TruthRead:
		if ev.Truth.Origin == event.OriginUser && ev.PID != 0 && t.owner != 0 && ev.PID != t.owner {
			// Another owner: the QPN was destroyed and reused unseen.
			*t = qpTrack{born: ev.Boot}
			e.dropEnded(k, ev.Boot, "the qp number now belongs to another process")
		}
		if ev.PID != 0 {
			t.owner = ev.PID
		}
		if ev.Truth.Mig == event.MigRearm || ev.Truth.Mig == event.MigArmed {
			e.rearmed(k, t, ev.Boot)
		}
	case ev.Kind == event.KindModify && ev.Modify != nil && ev.Modify.Ret == 0:
		if p := ev.Modify.Primary; p != nil {
			c := *p
			t.primary = &c
		}
		if p := ev.Modify.Alt; p != nil {
			c := *p
			t.alt = &c
		}
		if ev.Modify.Has(event.AttrPathMigState) && ev.Modify.MigState == event.MigRearm {
			e.rearmed(k, t, ev.Boot)
		}
	case ev.Kind == event.KindQPEvent && ev.QP != nil && ev.QP.Type == event.EvPathMig:
		t.prev, t.primary, t.alt = t.primary, t.alt, nil
		t.acted, t.migratedAt = false, ev.Boot
	}
}

func (e *Enforcer) rearmed(k event.QPKey, t *qpTrack, boot uint64) {
	if boot > t.rearmedAt {
		t.rearmedAt = boot
	}
	e.dropEnded(k, boot, "the qp was rearmed")
}

// dropEnded drops the pending actions on QPN k about a migration before
// boot: their generation ended, or their finding no longer holds.
func (e *Enforcer) dropEnded(k event.QPKey, boot uint64, why string) {
	e.keepWaiting(func(p pendingAct) bool {
		if p.key.Device == k.Device && p.key.QPN == k.QPN && p.since < boot {
			e.dropped(p, why)
			return false
		}
		return true
	})
}

// Resolve takes the model's resolutions: a missed-rearm resolved (the owner
// rearmed during the grace period) needs no action any more.
func (e *Enforcer) Resolve(f apm.Finding) {
	if !f.Resolved {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.keepWaiting(func(p pendingAct) bool {
		if p.f.ID == f.Resolves && p.key == f.QP {
			e.dropped(p, "its finding was resolved")
			return false
		}
		return true
	})
}

func (e *Enforcer) dropped(p pendingAct, why string) {
	e.stats.Dropped++
	if e.Log != nil {
		e.Log("pending action dropped", "qp", p.key.String(), "finding", p.f.ID, "why", why)
	}
}

// gone drops p, and says so, when events were lost since its migration or
// the generation it judged is no longer the one alive.
func (e *Enforcer) gone(p *pendingAct) bool {
	if why := e.lostSinceMigration(p); why != "" {
		e.droppedLost(*p, why)
		return true
	}
	if why := e.stale(p); why != "" {
		e.dropped(*p, why)
		return true
	}
	return false
}

// stale says why the generation p judged is no longer the one to act on
// ("" when it still is): destroyed or gone, replaced by a new QP with the
// same number, or rearmed after the migration.
func (e *Enforcer) stale(p *pendingAct) string {
	t := e.qps[event.QPKey{Device: p.key.Device, QPN: p.key.QPN}]
	switch {
	case t == nil:
		return "the qp was destroyed or is gone"
	case t.born > p.since:
		return "a new qp took the number"
	case t.rearmedAt > p.since:
		return "the qp was rearmed"
	}
	return ""
}
