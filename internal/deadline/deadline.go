// Package deadline keeps one context with a deadline for as long as the
// deadline and its parent stay the same: a loop that waits for each event
// with a deadline pays for a timer once per deadline, not once per event
// (context.WithDeadline starts a timer and allocates every time).
package deadline

import (
	"context"
	"time"
)

// Reuse hands out the context for (parent, at), made anew only when either
// changes. Its zero value is ready; it is not safe for concurrent use.
type Reuse struct {
	parent context.Context
	at     time.Time
	c      context.Context
	cancel context.CancelFunc
}

// Ctx returns parent with the deadline at, or parent itself when at is
// zero. The context returned before is cancelled when a new one is made.
func (d *Reuse) Ctx(parent context.Context, at time.Time) context.Context {
	if at.IsZero() {
		return parent
	}
	if d.c == nil || d.parent != parent || !at.Equal(d.at) {
		d.Stop()
		d.c, d.cancel = context.WithDeadline(parent, at)
		d.parent, d.at = parent, at
	}
	return d.c
}

// Stop cancels the context last handed out.
func (d *Reuse) Stop() {
	if d.cancel != nil {
		d.cancel()
	}
	d.parent, d.c, d.cancel = nil, nil, nil
}
