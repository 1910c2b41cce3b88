package actuator

import (
	"context"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
)

// DefaultParallel is how many actions run side by side by default.
const DefaultParallel = 8

// Act takes a new finding: a missed-rearm is scheduled after the grace
// period (started at once when the grace is zero), keyed by the QP
// generation it judged; a later one for the same generation replaces it.
func (e *Enforcer) Act(ctx context.Context, f apm.Finding) []apm.Finding {
	if f.Kind != apm.MissedRearm || f.Resolved {
		return nil
	}
	e.mu.Lock()
	e.init()
	since := f.First
	if since == 0 {
		since = f.Last
	}
	p := pendingAct{key: f.QP, f: f, since: since, due: e.Now().Add(time.Duration(e.Policy.Grace))}
	if e.gone(&p) {
		e.mu.Unlock()
		return nil
	}
	e.keepWaiting(func(q pendingAct) bool { return q.key != p.key })
	e.pending = append(e.pending, p)
	e.mu.Unlock()
	return e.Tick(ctx, e.Now())
}

// NextDue is when the earliest action falls due: its grace over, or its
// turn in the rate limit's queue (ok false: none waits), so that audit
// runs Tick then rather than on its next tick. An action whose QP has one
// running waits for it (it is due again once that one is collected).
func (e *Enforcer) NextDue() (due time.Time, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.pending {
		if e.inflight[qpOf(p)] {
			continue
		}
		if !ok || p.due.Before(due) {
			due, ok = p.due, true
		}
	}
	if t, turn := e.nextTurn(); turn && (!ok || t.Before(due)) {
		due, ok = t, true
	}
	return due, ok
}

// Tick starts the actions whose grace is over, in their turn in the rate
// limit's queue, up to Parallel running at once, never two on one QP.
// Without Background it returns once they finished, with their findings in
// the order they started; with it, at once (Collect has the findings
// later).
func (e *Enforcer) Tick(ctx context.Context, now time.Time) []apm.Finding {
	e.mu.Lock()
	e.init()
	e.graceOver(now)
	due := e.admitInTurn(now)
	e.mu.Unlock()
	found := make([]apm.Finding, len(due))
	ok := make([]bool, len(due))
	e.running.Add(len(due))
	// The slots are taken in the queue's order: an action waiting for its
	// turn to pass the rate limit (inTurn) holds one, and every action
	// before it in the batch has had its own.
	go func() {
		for i := range due {
			e.slots <- struct{}{}
			go func() {
				defer e.running.Done()
				defer func() { <-e.slots }()
				e.mu.Lock()
				defer e.mu.Unlock()
				if ctx.Err() != nil {
					e.dropped(due[i], "the enforcer is stopping") // waited for a slot until then
				} else {
					found[i], ok[i] = e.run(ctx, &due[i])
				}
				e.passedTurn(&due[i])
				delete(e.inflight, qpOf(due[i]))
				if e.Background {
					if ok[i] {
						e.done = append(e.done, found[i])
					}
					select {
					case e.doneC <- struct{}{}:
					default:
					}
				}
			}()
		}
	}()
	if e.Background {
		return nil
	}
	e.running.Wait()
	var out []apm.Finding
	for i := range due {
		if ok[i] {
			out = append(out, found[i])
		}
	}
	return out
}

// Done is readable once background actions finished since the last
// Collect (never without Background, nor before the first finding). The
// audit loop asks at every turn: no lock, since doneC is set only by init,
// which runs on the caller's goroutine too.
func (e *Enforcer) Done() <-chan struct{} {
	if !e.Background {
		return nil
	}
	return e.doneC
}

// Collect returns the findings of the background actions finished since
// the last call.
func (e *Enforcer) Collect() []apm.Finding {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.done
	e.done = nil
	return out
}

// Wait waits for the actions running (their context ends them early).
func (e *Enforcer) Wait() { e.running.Wait() }

// unlocked runs f without the enforcer's lock (run holds it otherwise):
// for the owner lookup and the operation, which wait on the kernel.
func (e *Enforcer) unlocked(f func()) {
	e.mu.Unlock()
	defer e.mu.Lock()
	f()
}

func qpOf(p pendingAct) event.QPKey { return event.QPKey{Device: p.key.Device, QPN: p.key.QPN} }
