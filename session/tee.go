package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/recording"
)

// Tee returns an open function whose source also records every event it
// hands out (before any display filter) to a new recording at path. With
// an empty path it returns open itself. It is the hook of `apmwatch trace
// --record`: the trace code does not change.
//
// The first Close of the returned source detaches the probes, drains what
// they delivered into the file (the caller still gets those events from
// Next), writes the counters and closes the file.
func Tee(path string, open func() (event.Source, error)) func() (event.Source, error) {
	if path == "" {
		return open
	}
	return func() (event.Source, error) {
		src, err := open()
		if err != nil {
			return nil, err
		}
		w, err := recording.Create(path, src.Meta(), recording.Options{})
		if err != nil {
			src.Close()
			return nil, err
		}
		return &tee{Source: src, w: w}, nil
	}
}

type tee struct {
	event.Source
	w       *recording.Writer
	closed  bool
	drained []*event.Event // events drained at Close, still to hand out
	err     error          // the recording's error, reported once
	stats   time.Time      // when the counters were last written
}

func (t *tee) Next(ctx context.Context) (*event.Event, error) {
	for {
		e, mark, err := t.NextMark(ctx)
		if err != nil || mark == 0 {
			return e, err
		}
	}
}

// NextMark passes the source's watermarks through (event.Marker): the
// recording holds events, the marks are for the live consumer.
func (t *tee) NextMark(ctx context.Context) (*event.Event, uint64, error) {
	if t.closed {
		if len(t.drained) > 0 {
			e := t.drained[0]
			t.drained = t.drained[1:]
			return e, 0, nil
		}
		if err := t.err; err != nil {
			t.err = nil
			return nil, 0, err
		}
		return nil, 0, io.EOF
	}
	e, mark, err := event.NextOrMark(ctx, t.Source)
	if err != nil || mark != 0 {
		return nil, mark, err
	}
	if err := t.write(e); err != nil {
		return nil, 0, err
	}
	return e, 0, nil
}

// WantMark passes the request on to a source that gives marks.
func (t *tee) WantMark(at uint64) {
	if m, ok := t.Source.(event.Marker); ok {
		m.WantMark(at)
	}
}

// write records e, and the source's counters now and then.
func (t *tee) write(e *event.Event) error {
	if werr := t.w.Write(e); werr != nil {
		return fmt.Errorf("writing the recording: %w", werr)
	}
	if now := time.Now(); now.Sub(t.stats) >= statsEvery {
		t.stats = now
		if werr := t.w.WriteStats(t.Source.Stats()); werr != nil {
			return fmt.Errorf("writing the recording: %w", werr)
		}
	}
	return nil
}

func (t *tee) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	err := t.Source.Close()
	for {
		e, nerr := t.Source.Next(context.Background())
		if nerr != nil {
			if !errors.Is(nerr, io.EOF) {
				err = errors.Join(err, nerr)
			}
			break
		}
		t.drained = append(t.drained, e)
		if werr := t.w.Write(e); werr != nil {
			t.err = fmt.Errorf("writing the recording: %w", werr)
		}
	}
	werr := t.w.WriteStats(t.Source.Stats())
	if cerr := t.w.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil && t.err == nil {
		t.err = fmt.Errorf("closing the recording: %w", werr)
	}
	return err
}
