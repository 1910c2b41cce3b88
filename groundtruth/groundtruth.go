// Package groundtruth merges ground-truth readings of every QP into a live
// event stream: it polls rdma netlink (package rdmanl) on an interval and
// hands its readings out as event.KindTruth events between the source's
// own events, so the model, the display and a recording all see what the
// kernel said and when. The rules that turn a snapshot into readings are
// rdmanl.Feeder's.
package groundtruth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// Options configure the poller.
type Options struct {
	Every time.Duration                   // how often to read; 0: no readings
	Read  func() (rdmanl.Snapshot, error) // rdmanl.Read
	Warn  func(error)                     // each distinct read error, once (may be nil)
}

// Wrap returns src with readings merged in: the first at the first Next,
// then one every o.Every. Close closes src and stops the readings; the
// readings already taken and src's remaining events are still handed out.
// With o.Every 0 or no o.Read it returns src.
func Wrap(src event.Source, o Options) event.Source {
	if o.Every <= 0 || o.Read == nil {
		return src
	}
	return &source{Source: src, o: o, feeder: rdmanl.NewFeeder(nil), off: src.Meta().BootOffset, seen: map[string]bool{}}
}

type source struct {
	event.Source
	o       Options
	feeder  *rdmanl.Feeder
	off     time.Duration // wall clock minus CLOCK_BOOTTIME
	next    time.Time     // when to read next
	pending []*event.Event
	closed  bool
	seen    map[string]bool // read errors already reported
}

// Next returns the next reading or event.
func (s *source) Next(ctx context.Context) (*event.Event, error) {
	for {
		if len(s.pending) > 0 {
			e := s.pending[0]
			s.pending[0] = nil
			s.pending = s.pending[1:]
			return e, nil
		}
		if s.closed {
			return s.Source.Next(ctx)
		}
		if !time.Now().Before(s.next) {
			s.read()
			continue
		}
		wctx, cancel := context.WithDeadline(ctx, s.next)
		e, err := s.Source.Next(wctx)
		cancel()
		if err == nil {
			return e, nil
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			continue // time to read
		}
		return nil, err
	}
}

func (s *source) read() {
	snap, err := s.o.Read()
	s.next = time.Now().Add(s.o.Every)
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
	s.closed = true
	return s.Source.Close()
}
