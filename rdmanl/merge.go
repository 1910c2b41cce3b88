package rdmanl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/deadline"
)

// MergeOptions configure the poller.
type MergeOptions struct {
	Every time.Duration            // how often to read; 0: no readings
	Read  func() (Snapshot, error) // the reader: Read
	Warn  func(error)              // each distinct read error, once (may be nil)
	// OnRead, when set, sees every reading (snapshot or error) before its
	// events are handed out, in the goroutine that calls Next: for a
	// consumer that needs the rows themselves (metrics of the whole table).
	// It must not keep the snapshot's slices.
	OnRead func(Snapshot, error)
}

// Merge returns src with ground-truth readings of every QP merged in: it
// polls rdma netlink (o.Read) and hands its readings out as event.KindTruth
// events between the source's own events, so the model, the display and a
// recording all see what the kernel said and when. The rules that turn a
// snapshot into readings are Feeder's, which also hears of every QP the
// source's events are about (a QP the probes saw and a snapshot no longer
// lists is gone). The first reading comes at the first Next, then one every
// o.Every. Close closes src and stops the readings; the readings already
// taken and src's remaining events are still handed out. Close may be
// called while another goroutine waits in Next. With o.Every 0 or no
// o.Read it returns src.
//
// A reading never overtakes an event stamped before it. The source's
// events come through a queue (the ring buffer, the collector's channel)
// that a busy consumer drains late, and a reading is taken now: handed out
// at once, it would tell the model that a QP reads MIGRATED while the
// PATH_MIG stamped before it still waits in that queue, and a deadline
// judged meanwhile would find no migration. So from a source with
// watermarks (event.Marker) a reading is held until a mark at or past its
// stamp comes, or an event stamped at or after it (every event stamped
// before it has been handed out), and no new reading is taken while one is
// held: under a storm the readings wait
// and thin out instead of piling up. A source without marks gets its
// readings at once, as they are taken.
func Merge(src event.Source, o MergeOptions) event.Source {
	if o.Every <= 0 || o.Read == nil {
		return src
	}
	return &mergeSource{Source: src, o: o, feeder: NewFeeder(), off: src.Meta().BootOffset, seen: map[string]bool{}}
}

type mergeSource struct {
	event.Source
	o       MergeOptions
	feeder  *Feeder
	off     time.Duration // wall clock minus CLOCK_BOOTTIME
	next    time.Time     // when to read next
	pending []*event.Event
	held    []*event.Event // a reading waiting for a mark past heldAt
	heldAt  uint64         // the held reading's stamp (Boot)
	mark    uint64         // a mark to hand out once the reading it released is out
	closed  atomic.Bool
	seen    map[string]bool // read errors already reported
	wait    deadline.Reuse  // the wait until the next reading: one timer per reading, not per event
}

// Next returns the next reading or event.
func (s *mergeSource) Next(ctx context.Context) (*event.Event, error) {
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
func (s *mergeSource) NextMark(ctx context.Context) (*event.Event, uint64, error) {
	for {
		if len(s.pending) > 0 {
			e := s.pending[0]
			s.pending[0] = nil
			s.pending = s.pending[1:]
			return e, 0, nil
		}
		if s.mark != 0 {
			m := s.mark
			s.mark = 0
			return nil, m, nil
		}
		closed := s.closed.Load()
		wait := ctx
		if len(s.held) == 0 && !closed {
			if !time.Now().Before(s.next) {
				s.read()
				continue
			}
			wait = s.wait.Ctx(ctx, s.next)
		}
		e, mark, err := event.NextOrMark(wait, s.Source)
		if closed && errors.Is(err, io.EOF) && s.release(0) {
			continue // every event is out: the reading follows them
		}
		if err == nil {
			if e != nil && !closed {
				s.feeder.Saw(e)
			}
			if s.passes(e, mark) {
				if e != nil {
					s.pending = append(s.pending, e)
				}
				continue
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
func (s *mergeSource) WantMark(at uint64) {
	if m, ok := s.Source.(event.Marker); ok {
		m.WantMark(at)
	}
}

func (s *mergeSource) read() {
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
	_, marks := s.Source.(event.Marker)
	for _, e := range s.feeder.Events(snap) {
		e.Time = time.Unix(0, int64(e.Boot)+int64(s.off))
		if !marks {
			s.pending = append(s.pending, e)
			continue
		}
		s.held = append(s.held, e)
		s.heldAt = max(s.heldAt, e.Boot)
	}
}

// passes releases the held reading when the source's next item shows that
// every event stamped before it has come: a mark at or past its stamp, or
// an event stamped at or after it (the ring buffer hands records out in
// the order they were stamped, give or take the mark's slack; a closed
// source drains without marks). The item follows the reading.
func (s *mergeSource) passes(e *event.Event, mark uint64) bool {
	switch {
	case len(s.held) == 0:
		return false
	case mark != 0:
		return mark >= s.heldAt && s.release(mark)
	case e != nil && e.Boot >= s.heldAt:
		return s.release(0)
	}
	return false
}

// release hands out the held reading, followed by mark (0: none). It
// reports whether there was one.
func (s *mergeSource) release(mark uint64) bool {
	if len(s.held) == 0 {
		return false
	}
	s.pending = append(s.pending, s.held...)
	clear(s.held)
	s.held, s.heldAt, s.mark = s.held[:0], 0, mark
	return true
}

// Close closes the source; no reading is taken after it.
func (s *mergeSource) Close() error {
	s.closed.Store(true)
	return s.Source.Close()
}
