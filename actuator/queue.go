package actuator

import (
	"cmp"
	"slices"
	"time"
)

// The rate limit paces, it never abandons: the actions whose grace is over
// wait in one queue, in the order they fell due, and each starts (its
// owner looked up, every check run again) only when its turn comes: when
// the limit would admit it, counting the actions admitted before it. An
// action its owner's own limit refuses, once the lookup names the owner,
// goes back to its place with the owner known, and the queue passes it
// over until that owner's period frees a slot. So an action costs one
// owner lookup, two when its owner turns out to be over its limit, however
// long the queue.

// graceOver moves the actions whose grace is over to the tail of the queue,
// in the order they fell due. One whose QP has an action running stays
// until that one is collected.
func (e *Enforcer) graceOver(now time.Time) {
	var due []pendingAct
	keep := e.pending[:0]
	for _, p := range e.pending {
		if now.Before(p.due) || e.inflight[qpOf(p)] {
			keep = append(keep, p)
		} else {
			due = append(due, p)
		}
	}
	clear(e.pending[len(keep):])
	e.pending = keep
	slices.SortStableFunc(due, func(a, b pendingAct) int { return a.due.Compare(b.due) })
	for _, p := range due {
		e.seq++
		p.seq = e.seq
		e.queue = append(e.queue, p)
	}
}

// batch is the actions one turn of the queue admitted: they look their
// owners up side by side, and pass the limit in the queue's order (two of
// one owner: the first takes the owner's slot).
type batch struct {
	next   int    // the first action not past the limit yet
	passed []bool // by action
}

// admitInTurn takes from the queue, in order, the actions the limit admits
// now, never two on one QP, and marks them running and held (their owner
// lookup is still to come).
func (e *Enforcer) admitInTurn(now time.Time) []pendingAct {
	l := e.limiter(now)
	var start []pendingAct
	b := &batch{}
	started := make([]bool, len(e.queue))
	for _, i := range e.fairOrder() {
		p := &e.queue[i]
		q := qpOf(*p)
		if e.inflight[q] {
			continue
		}
		why, next, known := l.check(p.owner)
		if why == "" {
			l.hold(p.owner)
			e.held[q] = p.owner
			e.inflight[q] = true
			e.servedNow(p.f.PID, now)
			p.batch, p.nth = b, len(start)
			start = append(start, *p)
			started[i] = true
			continue
		}
		if !p.waited {
			p.waited = true
			e.deferred(*p, next, known, why)
		}
	}
	keep := e.queue[:0]
	for i, p := range e.queue {
		if !started[i] {
			keep = append(keep, p)
		}
	}
	clear(e.queue[len(keep):])
	e.queue = keep
	e.forgetServed(now)
	b.passed = make([]bool, len(start))
	return start
}

// inTurn waits (the lock let go meanwhile) until the actions before p in
// its batch passed the limit. The QP may have changed meanwhile: the
// caller checks again.
func (e *Enforcer) inTurn(p *pendingAct) {
	for p.batch != nil && p.batch.next < p.nth {
		e.turn.Wait()
	}
}

// passedTurn records that p passed the limit (admitted or sent back), or
// ended before it, and lets the next actions of its batch take their turn.
func (e *Enforcer) passedTurn(p *pendingAct) {
	delete(e.held, qpOf(*p))
	b := p.batch
	if b == nil || b.passed[p.nth] {
		return
	}
	b.passed[p.nth] = true
	for b.next < len(b.passed) && b.passed[b.next] {
		b.next++
	}
	e.turn.Broadcast()
}

// requeue puts back in its place an action the limit refused once its
// owner was known.
func (e *Enforcer) requeue(p pendingAct, owner string, next time.Time, why string) {
	p.owner, p.waited, p.batch = owner, true, nil
	e.deferred(p, next, true, why)
	i, _ := slices.BinarySearchFunc(e.queue, p.seq, func(q pendingAct, seq uint64) int { return cmp.Compare(q.seq, seq) })
	e.queue = slices.Insert(e.queue, i, p)
}

// nextTurn is when the limit admits the first action of the queue it will
// admit (ok false: none waits, or only actions running can make room).
func (e *Enforcer) nextTurn() (at time.Time, ok bool) {
	if len(e.queue) == 0 {
		return at, false
	}
	now := e.Now()
	l := e.limiter(now)
	for _, p := range e.queue {
		if e.inflight[qpOf(p)] {
			continue
		}
		why, next, known := l.check(p.owner)
		if why == "" {
			return now, true
		}
		if known && (!ok || next.Before(at)) {
			at, ok = next, true
		}
	}
	return at, ok
}

// deferred counts an action sent to wait for the limit, and logs the 1st,
// 2nd, 4th, ... (a storm does not flood the log).
func (e *Enforcer) deferred(p pendingAct, next time.Time, known bool, why string) {
	e.stats.Deferred++
	if e.Log == nil || e.stats.Deferred&(e.stats.Deferred-1) != 0 {
		return
	}
	args := []any{"qp", p.key.String(), "finding", p.f.ID, "why", why, "waiting", len(e.queue), "deferred", e.stats.Deferred}
	if known {
		args = append(args, "until", next)
	}
	e.Log("action deferred by the rate limit", args...)
}

// keepWaiting runs keep on every action waiting, for its grace or in the
// queue, and forgets those it returns false for.
func (e *Enforcer) keepWaiting(keep func(pendingAct) bool) {
	for _, l := range []*[]pendingAct{&e.pending, &e.queue} {
		*l = slices.DeleteFunc(*l, func(p pendingAct) bool { return !keep(p) })
	}
}
