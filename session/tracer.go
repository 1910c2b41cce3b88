package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/output"
)

// tracer is one trace's loop: every event goes through the model (which
// sees them all); the display filter picks what is shown, events and
// findings alike. Only the loop's goroutine touches it.
type tracer struct {
	cfg    TraceConfig
	w      output.Writer
	model  *apm.Model // nil with --no-findings
	boot   func() uint64
	counts output.Counts
	err    error // the first error writing a finding
}

// found is the model's sink.
func (t *tracer) found(f apm.Finding) {
	keep := t.cfg.Filter.MatchFinding(&f)
	t.counts.AddFinding(&f, keep)
	if keep && t.err == nil {
		if err := t.w.WriteFinding(&f); err != nil {
			t.err = fmt.Errorf("writing output: %w", err)
		}
	}
}

// pump takes events until the source ends or ctx is done (both normal
// ends). While live, the model's clock moves on every advanceEvery even
// when no event comes.
func (t *tracer) pump(ctx context.Context, src event.Source, live bool) error {
	tick := time.Now().Add(advanceEvery)
	for {
		nctx, cancel := ctx, context.CancelFunc(func() {})
		if live && t.model != nil && t.boot != nil {
			nctx, cancel = context.WithDeadline(ctx, tick)
		}
		e, err := src.Next(nctx)
		cancel()
		switch {
		case err == nil:
			if err := t.event(e); err != nil {
				return err
			}
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		case errors.Is(err, io.EOF), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return nil
		default:
			return err
		}
		if t.err != nil {
			return t.err
		}
		if live && t.model != nil && t.boot != nil && !time.Now().Before(tick) {
			t.model.Advance(t.boot())
			tick = time.Now().Add(advanceEvery)
		}
	}
}

func (t *tracer) event(e *event.Event) error {
	if t.model != nil {
		t.model.Handle(e)
	}
	// Readings come every second for every QP: shown only when asked for.
	keep := t.cfg.Filter.Match(e) && (e.Kind != event.KindTruth || t.cfg.Filter.Names(event.KindTruth))
	t.counts.Add(e, keep)
	if keep {
		if err := t.w.Write(e); err != nil {
			return fmt.Errorf("writing output: %w", err)
		}
	}
	return nil
}

// finish applies what the model still holds and judges the deadlines that
// passed by now: after the drain no event can come any more.
func (t *tracer) finish() error {
	if t.model == nil {
		return nil
	}
	end := t.model.Now()
	if t.boot != nil {
		end = t.boot()
	}
	t.model.Finish(end)
	t.counts.Model = t.model.Stats()
	return t.err
}
