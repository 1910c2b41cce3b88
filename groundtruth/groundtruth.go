// Package groundtruth merges ground-truth readings of every QP into a live
// event stream: it polls rdma netlink (package rdmanl) on an interval and
// hands its readings out as event.KindTruth events between the source's
// own events, so the model, the display and a recording all see what the
// kernel said and when. The rules that turn a snapshot into readings are
// rdmanl.Feeder's, which also hears of every QP the source's events are
// about (a QP the probes saw and a snapshot no longer lists is gone).
package groundtruth

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/deadline"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// Options configure the poller.
type Options struct {
	Every time.Duration                   // how often to read; 0: no readings
	Read  func() (rdmanl.Snapshot, error) // rdmanl.Read
	Warn  func(error)                     // each distinct read error, once (may be nil)
	// OnRead, when set, sees every reading (snapshot or error) before its
	// events are handed out, in the goroutine that calls Next: for a
	// consumer that needs the rows themselves (metrics of the whole table).
	// It must not keep the snapshot's slices.
	OnRead func(rdmanl.Snapshot, error)
}

// Wrap returns src with readings merged in: the first at the first Next,
// then one every o.Every. Close closes src and stops the readings; the
// readings already taken and src's remaining events are still handed out.
// Close may be called while another goroutine waits in Next.
// With o.Every 0 or no o.Read it returns src.
func Wrap(src event.Source, o Options) event.Source {
	if o.Every <= 0 || o.Read == nil {
		return src
	}
	return &source{Source: src, o: o, feeder: rdmanl.NewFeeder(), off: src.Meta().BootOffset, seen: map[string]bool{}}
}

type source struct {
	event.Source
	o       Options
	feeder  *rdmanl.Feeder
	off     time.Duration // wall clock minus CLOCK_BOOTTIME
	next    time.Time     // when to read next
	pending []*event.Event
	closed  atomic.Bool
	seen    map[string]bool // read errors already reported
	wait    deadline.Reuse  // the wait until the next reading: one timer per reading, not per event
}

// Next returns the next reading or event.
func (s *source) Next(ctx context.Context) (*event.Event, error) {
	for {
		e, mark, err := s.NextMark(ctx)
		if mark == 0 || err != nil {
			return e, err
		}
	}
}

// NextMark returns the next reading, event or watermark of the source
// (event.Marker). A reading is handed out before anything the source
// gives after it was taken, so a mark never overtakes a reading stamped
// before it.
func (s *source) NextMark(ctx context.Context) (*event.Event, uint64, error) {
	for {
		if len(s.pending) > 0 {
			e := s.pending[0]
			s.pending[0] = nil
			s.pending = s.pending[1:]
			return e, 0, nil
		}
		if s.closed.Load() {
			return event.NextOrMark(ctx, s.Source)
		}
		if !time.Now().Before(s.next) {
			s.read()
			continue
		}
		e, mark, err := event.NextOrMark(s.wait.Ctx(ctx, s.next), s.Source)
		if err == nil {
			if e != nil {
				s.feeder.Saw(e)
			}
			return e, mark, nil
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			continue // time to read
		}
		return nil, 0, err
	}
}

// WantMark passes the request on to a source that gives marks.
func (s *source) WantMark(at uint64) {
	if m, ok := s.Source.(event.Marker); ok {
		m.WantMark(at)
	}
}

func (s *source) read() {
	snap, err := s.o.Read()
	s.next = time.Now().Add(s.o.Every)
	if s.o.OnRead != nil {
		s.o.OnRead(snap, err)
	}
	if err != nil {
		if msg := err.Error(); !s.seen[msg] && s.o.Warn != nil {
			s.seen[msg] = true
			s.o.Warn(fmt.Errorf("ground truth: reading rdma netlink: %w", err))
		}
		return
	}
	for _, e := range s.feeder.Events(snap) {
		e.Time = time.Unix(0, int64(e.Boot)+int64(s.off))
		s.pending = append(s.pending, e)
	}
}

// Close closes the source; no reading is taken after it.
func (s *source) Close() error {
	s.closed.Store(true)
	return s.Source.Close()
}
