package audit

import (
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// The model's deadlines are judged when they fall due, not on a tick.
// After every change the loop asks the model what is due next (Due: the
// earliest deadline, or the oldest input in the reorder stage) and:
//   - asks the source for a watermark past it (event.Marker): the
//     collector wakes at that time, reads what the probes queued and hands
//     out a mark, and the model judges up to it at once (Settle);
//   - sets one timer for a reorder window past it, where Advance judges it
//     by the clock, for a source that has given no mark (one without marks).
// The one-second tick advances the model by the clock too, for such a
// source. Once the source has given a mark, marks alone move the model:
// in a storm whose ring buffer does not empty, deadlines wait for the
// events stamped before them instead of being judged without them. An actor that waits
// (the enforcer's grace period: Scheduler) gets its own timer the same way.

// Timer is the loop's one timer (time.Timer); tests pass a fake clock's.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

type realTimer struct{ t *time.Timer }

func newRealTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }
func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop()                 { r.t.Stop() }

// wake is the loop's schedule: the Boot time its timer is set for and the
// mark it last asked for; and the actor's next action (Scheduler).
type wake struct {
	timer  Timer
	at     uint64 // Boot the timer fires at; 0: stopped
	wanted uint64 // last WantMark

	actTimer Timer
	actAt    time.Time // wall clock the actor's timer fires at; zero: stopped
}

func (w *wake) actTimerC() <-chan time.Time {
	if w.actTimer == nil || w.actAt.IsZero() {
		return nil
	}
	return w.actTimer.C()
}

// scheduleActor sets the actor's timer for its next action.
func (d *daemon) scheduleActor() {
	s, ok := d.cfg.Actor.(Scheduler)
	if !ok {
		return
	}
	w := &d.wake
	due, ok := s.NextDue()
	if !ok {
		due = time.Time{}
	}
	if due.Equal(w.actAt) {
		return
	}
	w.actAt = due
	if due.IsZero() {
		if w.actTimer != nil {
			w.actTimer.Stop()
		}
		return
	}
	wait := max(due.Sub(d.now()), 0)
	if w.actTimer == nil {
		w.actTimer = d.deps.NewTimer(wait)
		return
	}
	w.actTimer.Stop()
	w.actTimer.Reset(wait)
}

// actorDone is readable once a background actor has findings to collect
// (nil, never ready, for an actor that is not one).
func (d *daemon) actorDone() <-chan struct{} {
	if b, ok := d.cfg.Actor.(Background); ok {
		return b.Done()
	}
	return nil
}

// actorCollect writes what the background actor's finished actions found;
// wait first waits for the ones running (shutdown).
func (d *daemon) actorCollect(wait bool) {
	b, ok := d.cfg.Actor.(Background)
	if !ok {
		return
	}
	if wait {
		b.Wait()
	}
	for _, f := range b.Collect() {
		d.finding(d.actorID(f), false)
	}
}

// actorTick runs the actor's due actions and writes what they found.
func (d *daemon) actorTick(now time.Time) {
	if d.cfg.Actor == nil {
		return
	}
	for _, f := range d.cfg.Actor.Tick(d.ctx, now) {
		d.finding(d.actorID(f), false)
	}
}

// timerC is the timer's channel, nil (never ready) while none is set.
func (w *wake) timerC() <-chan time.Time {
	if w.timer == nil || w.at == 0 {
		return nil
	}
	return w.timer.C()
}

// schedule sets the timer and the mark request for what the model has due.
func (d *daemon) schedule() {
	w := &d.wake
	due, ok := d.model.Due()
	if !ok {
		due = 0
	}
	if due != w.wanted {
		w.wanted = due
		if m, isMarker := d.src.(event.Marker); isMarker {
			m.WantMark(due)
		}
	}
	at := uint64(0)
	if ok && !d.marked { // marks judge what is due: no timer to spin on
		at = due + uint64(d.model.ReorderWindow())
	}
	if at == w.at {
		return
	}
	w.at = at
	if at == 0 {
		if w.timer != nil {
			w.timer.Stop()
		}
		return
	}
	wait := time.Duration(0)
	if now := d.deps.Boot(); at > now {
		wait = time.Duration(at - now)
	}
	if w.timer == nil {
		w.timer = d.deps.NewTimer(wait)
		return
	}
	w.timer.Stop()
	w.timer.Reset(wait)
}

// woken runs when the timer fires: the model judges what the clock allows.
func (d *daemon) woken() {
	d.wake.at = 0
	d.advance()
	d.publish()
}

// advance moves the model to the clock, unless the source gives marks:
// then only they move it (settle). Events wait in the ring buffer and in
// the queues between the collector and this loop while the daemon catches
// up with a storm; a deadline judged by the clock meanwhile would miss an
// event stamped before it that is still on its way (a PATH_MIG behind a
// reading of MIGRATED: a false mig-state-mismatch).
func (d *daemon) advance() {
	if !d.marked {
		d.model.Advance(d.deps.Boot())
	}
}

// settle takes a watermark of the current source.
func (d *daemon) settle(mark uint64) {
	d.marked = true
	d.model.Settle(mark)
	d.publish()
}
