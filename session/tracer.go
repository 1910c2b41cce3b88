package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/deadline"
	"github.com/apmwatch/apmwatch/output"
)

// tracer is one trace's loop: every event goes through the model (which
// sees them all); the display filter picks what is shown, events and
// findings alike. Only the loop's goroutine touches it.
type tracer struct {
	cfg    TraceConfig
	w      *output.Buffered
	model  *apm.Model // nil with --no-findings
	boot   func() uint64
	counts output.Counts
	err    error     // the first error writing a finding
	since  time.Time // when output began to wait in w's buffer; zero: none waits
	src    event.Source
	losses apm.LossWatch
	marked bool // the source gives watermarks: they, not the clock, move the model
}

// flushDelay is the longest a line waits in the output buffer while the
// trace runs: the buffer is flushed this long after its first unflushed
// line, at the latest, whether more events come or not.
var flushDelay = 10 * time.Millisecond

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
// ends), and flushes the output when it returns. While live, the model's
// clock moves with the source's watermarks (settle), or, from a source
// without them, every advanceEvery even when no event comes.
func (t *tracer) pump(ctx context.Context, src event.Source, live bool) error {
	err := t.loop(ctx, src, live)
	t.since = time.Time{}
	if ferr := t.w.Flush(); ferr != nil && err == nil {
		err = fmt.Errorf("writing output: %w", ferr)
	}
	return err
}

func (t *tracer) loop(ctx context.Context, src event.Source, live bool) error {
	t.src = src
	clock := live && t.model != nil && t.boot != nil
	tick := time.Now().Add(advanceEvery)
	var dl deadline.Reuse // one timer per tick or flush, not per event
	defer dl.Stop()
	for {
		var at time.Time // when Next must return: the next tick or flush
		if clock {
			at = tick
		}
		if flush := t.since.Add(flushDelay); !t.since.IsZero() && (at.IsZero() || flush.Before(at)) {
			at = flush
		}
		e, mark, err := event.NextOrMark(dl.Ctx(ctx, at), src)
		switch {
		case err == nil && mark != 0:
			t.settle(mark)
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
		now := time.Now()
		if clock && !now.Before(tick) {
			t.losses.Check(t.model, src.Stats()) // before judging what lost events could change
			if !t.marked {
				t.model.Advance(t.boot())
			}
			tick = now.Add(advanceEvery)
		}
		if err := t.flushIfDue(now); err != nil {
			return err
		}
	}
}

// flushIfDue flushes the output once its first unflushed line has waited
// flushDelay; findings the model wrote count as lines too.
func (t *tracer) flushIfDue(now time.Time) error {
	switch {
	case !t.w.Pending(): // nothing written, or the full buffer went out
		t.since = time.Time{}
	case t.since.IsZero():
		t.since = now
	case !now.Before(t.since.Add(flushDelay)):
		t.since = time.Time{}
		if err := t.w.Flush(); err != nil {
			return fmt.Errorf("writing output: %w", err)
		}
	}
	return nil
}

// settle judges up to a watermark of the source: every event stamped
// before it has come. From the first mark on, the model's clock moves only
// by marks, never by CLOCK_BOOTTIME: events wait in the ring buffer and the
// collector's queue while a busy trace catches up, and a deadline judged by
// the clock meanwhile (a reading of MIGRATED, TruthGrace later) would miss
// the PATH_MIG still queued, stamped before it.
func (t *tracer) settle(mark uint64) {
	if t.model == nil {
		return
	}
	t.marked = true
	t.losses.Check(t.model, t.src.Stats()) // before judging what lost events could change
	t.model.Settle(mark)
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
	if t.src != nil {
		t.losses.Check(t.model, t.src.Stats())
	}
	t.model.Finish(end)
	t.counts.Model = t.model.Stats()
	return t.err
}
