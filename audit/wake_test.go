package audit

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// fakeClock moves the harness's Boot clock and fires the timers set on it.
type fakeClock struct {
	boot   *atomic.Uint64
	mu     sync.Mutex
	timers []*fakeTimer
}

type fakeTimer struct {
	clk *fakeClock
	c   chan time.Time
	at  uint64 // Boot it fires at, 0: stopped (under clk.mu)
}

func (c *fakeClock) newTimer(d time.Duration) Timer {
	t := &fakeTimer{clk: c, c: make(chan time.Time, 1)}
	c.mu.Lock()
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	t.Reset(d)
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }
func (t *fakeTimer) Stop() {
	t.clk.mu.Lock()
	t.at = 0
	t.clk.mu.Unlock()
}
func (t *fakeTimer) Reset(d time.Duration) {
	t.clk.mu.Lock()
	t.at = t.clk.boot.Load() + uint64(d)
	t.clk.mu.Unlock()
	t.clk.set(t.clk.boot.Load()) // a zero wait fires at once
}

// set moves the clock to now and fires what is due.
func (c *fakeClock) set(now uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.boot.Store(now)
	for _, t := range c.timers {
		if t.at != 0 && t.at <= now {
			t.at = 0
			select {
			case t.c <- time.Unix(0, int64(now)):
			default:
			}
		}
	}
}

// armed is the Boot the one timer is set for (0: none).
func (c *fakeClock) armed() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if t.at != 0 {
			return t.at
		}
	}
	return 0
}

// markSource is a fake source with watermarks (event.Marker): the test
// sends events and marks in the order the collector would.
type markSource struct {
	*fakeSource
	items chan item
	want  atomic.Uint64
}

func (s *markSource) NextMark(ctx context.Context) (*event.Event, uint64, error) {
	select {
	case it := <-s.items:
		return it.ev, it.mark, nil
	case <-s.done:
		return nil, 0, io.EOF
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

func (s *markSource) WantMark(at uint64) { s.want.Store(at) }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// migrated is missedRearm's story; it returns the migration's stamp.
func migrated(b *apmtest.Builder) uint64 {
	alt := apmtest.PathB
	b.Connect(17, apmtest.PathA, &alt)
	b.After(10 * time.Millisecond)
	mig := b.ForceMigrate(17).Boot
	b.PathMig(17)
	return mig
}

// Without watermarks the timer is set for the deadline plus the reorder
// window and judges it then, with no tick (the tick is an hour here).
func TestWakeTimerJudgesDeadline(t *testing.T) {
	clk := &fakeClock{}
	h := newHarnessWith(t, func(c *Config) { c.RecorderDir = "" }, time.Hour, func(h *harness, d *Deps) {
		clk.boot = &h.boot
		d.NewTimer = clk.newTimer
	})
	h.daemon()
	b := apmtest.New()
	b.Device = "rxe0"
	mig := migrated(b)
	clk.set(b.Now())
	h.feed(b.Steps)
	window := uint64(h.cfg.Model.ReorderWindow)
	deadline := mig + uint64(h.cfg.Model.RearmDeadline)
	// The inputs wait a window in the reorder stage; then the deadline.
	for step := 0; clk.armed() != deadline+window; step++ {
		waitFor(t, "the timer to be set", func() bool { return clk.armed() != 0 })
		if at := clk.armed(); at != deadline+window {
			if at > deadline+window || step > 10 {
				t.Fatalf("timer at %d, want %d (deadline %d + window %d)", at, deadline+window, deadline, window)
			}
			clk.set(at)
			waitFor(t, "the timer to move", func() bool { return clk.armed() != at })
		}
	}
	clk.set(deadline + window - 1)
	time.Sleep(50 * time.Millisecond)
	if ls := readLines(t, h.cfg.Findings); len(ls) != 0 {
		t.Fatalf("judged before the timer: %+v", ls)
	}
	clk.set(deadline + window)
	ls := h.lines(1)
	if ls[0].Kind != string(apm.MissedRearm) {
		t.Fatalf("lines: %+v", ls)
	}
	waitFor(t, "the timer to stop", func() bool { return clk.armed() == 0 })
	h.stop()
}

// With watermarks the source is asked for one past what is due, and the
// deadline is judged the moment a mark passes it: no reorder window, no
// timer, no tick.
func TestWakeMarkJudgesDeadline(t *testing.T) {
	clk := &fakeClock{}
	var src *markSource
	act := &recordingActor{}
	h := newHarnessWith(t, func(c *Config) { c.RecorderDir, c.Actor = "", act }, time.Hour, func(h *harness, d *Deps) {
		clk.boot = &h.boot
		d.NewTimer = clk.newTimer
		src = &markSource{fakeSource: h.src, items: make(chan item, 64)}
		d.Open = func() (event.Source, error) { return src, nil }
	})
	d := h.daemon()
	b := apmtest.New()
	b.Device = "rxe0"
	mig := migrated(b)
	clk.set(b.Now())
	for _, s := range b.Steps {
		src.items <- item{ev: s.Ev}
	}
	first := b.Steps[0].Ev.Boot
	waitFor(t, "a mark asked for the first input", func() bool { return src.want.Load() == first })
	src.items <- item{mark: b.Now()}
	deadline := mig + uint64(h.cfg.Model.RearmDeadline)
	waitFor(t, "a mark asked for the deadline", func() bool { return src.want.Load() == deadline })
	src.items <- item{mark: deadline} // not past it: stamps at the deadline may still come
	time.Sleep(50 * time.Millisecond)
	if ls := readLines(t, h.cfg.Findings); len(ls) != 0 {
		t.Fatalf("judged before a mark passed the deadline: %+v", ls)
	}
	clk.set(deadline + 1)
	src.items <- item{mark: deadline + 1}
	ls := h.lines(2)
	if ls[0].Kind != string(apm.MissedRearm) || ls[1].Kind != "actuated" {
		t.Fatalf("lines: %+v", ls)
	}
	waitFor(t, "nothing left to ask for", func() bool { return src.want.Load() == 0 })
	h.stop()
	if len(act.acted) != 1 || act.acted[0].Last != deadline {
		t.Fatalf("acted on %+v", act.acted)
	}
	if late := d.model.Stats().Late; late != 0 {
		t.Fatalf("late inputs: %d", late)
	}
}

// schedActor is an actor with an action waiting until due (Scheduler).
type schedActor struct {
	recordingActor
	mu  sync.Mutex
	due time.Time
}

func (a *schedActor) NextDue() (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.due, !a.due.IsZero()
}

func (a *schedActor) Tick(ctx context.Context, now time.Time) []apm.Finding {
	a.mu.Lock()
	if !a.due.IsZero() && !now.Before(a.due) {
		a.due = time.Time{}
	}
	a.mu.Unlock()
	return a.recordingActor.Tick(ctx, now)
}

// An actor's waiting action gets a timer of its own: Tick runs when it is
// due, not on the daemon's tick (an hour here).
func TestWakeActorAtItsTime(t *testing.T) {
	clk := &fakeClock{}
	act := &schedActor{due: time.Now().Add(time.Hour)}
	h := newHarnessWith(t, func(c *Config) { c.RecorderDir, c.Actor = "", act }, time.Hour, func(h *harness, d *Deps) {
		clk.boot = &h.boot
		d.NewTimer = clk.newTimer
	})
	h.daemon()
	start := h.boot.Load()
	waitFor(t, "the actor's timer", func() bool { return clk.armed() != 0 })
	at := clk.armed()
	if d := time.Duration(at - start); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("timer set %v ahead, want the hour to the actor's action", d)
	}
	if n := act.ticks.Load(); n != 0 {
		t.Fatalf("ticked %d times before it was due", n)
	}
	act.mu.Lock()
	act.due = time.Now() // the fake timer fires at once: the action must be due by then
	act.mu.Unlock()
	clk.set(at)
	waitFor(t, "the actor's Tick", func() bool { return act.ticks.Load() == 1 })
	waitFor(t, "the actor's timer to stop", func() bool { return clk.armed() == 0 })
	h.stop()
}
