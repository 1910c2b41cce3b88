package audit

import (
	"context"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
)

// Actor is the extension point for a policy that acts on what the audit
// sees (the actuator). The daemon calls it from its one loop
// goroutine, never concurrently:
//
//   - Observe for every event, in the order the source delivered them
//     (before the model's reorder window); it must not keep ev after
//     returning and must return quickly (no I/O);
//   - Act once for each new finding (never for resolutions);
//   - Tick about once a second, with the wall clock.
//
// Act and Tick may take time (they run with the daemon's context, which is
// cancelled on SIGTERM); events queue meanwhile. The findings they return
// (for example Kind "actuated", or a resolution of an earlier one) are
// written, counted and bundled like the model's own. Give them an ID that
// does not clash with the model's: the daemon numbers them itself when ID
// is 0.
type Actor interface {
	Observe(ev *event.Event)
	Act(ctx context.Context, f apm.Finding) []apm.Finding
	Tick(ctx context.Context, now time.Time) []apm.Finding
}

// LossTaker is an Actor that is told when the source lost events (its
// counters grew, or the probes were re-attached and saw nothing between):
// at is the CLOCK_BOOTTIME ns by which they were lost (0: now), so that it
// can drop what it planned on evidence the lost events may contradict (a
// QPN destroyed and reused unseen). Called from the loop goroutine.
type LossTaker interface {
	Lost(at uint64)
}

// Resolver is an Actor that also takes the model's resolutions (Resolved
// set, Resolves naming the finding closed), for example to drop an action
// it scheduled on a finding that no longer holds. Called from the loop
// goroutine like Observe: no I/O, return quickly.
type Resolver interface {
	Resolve(f apm.Finding)
}

// Scheduler is an Actor with actions waiting for a time of their own (the
// enforcer's grace period): the daemon calls Tick when the earliest falls
// due, not only on its one-second tick. Called from the loop goroutine.
type Scheduler interface {
	NextDue() (time.Time, bool)
}

// Background is an Actor whose actions run off the loop goroutine, so that
// the loop keeps reading, judging and starting other actions while one
// waits on the kernel: Act and Tick start actions and return; Done is
// readable once some finished, and the daemon then calls Collect from the
// loop goroutine for their findings. Observe, Resolve and NextDue may run
// while actions do: the actor guards its own state. At shutdown the daemon
// calls Wait, then Collect.
type Background interface {
	Done() <-chan struct{}
	Collect() []apm.Finding
	Wait()
}
