package rdmanl_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// live hands out its events, then blocks until ctx is done (a quiet live
// source); once closed it ends with io.EOF.
type live struct {
	es     []*event.Event
	closed bool
}

func (l *live) Meta() event.Meta   { return event.Meta{BootOffset: time.Hour} }
func (l *live) Stats() event.Stats { return event.Stats{Events: 7} }
func (l *live) Close() error       { l.closed = true; return nil }
func (l *live) Next(ctx context.Context) (*event.Event, error) {
	if len(l.es) > 0 {
		e := l.es[0]
		l.es = l.es[1:]
		return e, nil
	}
	if l.closed {
		return nil, io.EOF
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func rc(qpn uint32, mig event.MigState) rdmanl.QP {
	return rdmanl.QP{Device: "rxe0", LQPN: qpn, Type: event.QPTypeRC, State: event.StateRTS, PathMig: mig, HasPathMig: true, PID: 9, Comm: "app"}
}

// Readings come at the first Next and then on the interval while the
// source is quiet; a QP that vanished is reported gone; events pass through.
func TestReadingsMergedIntoAQuietStream(t *testing.T) {
	src := &live{es: []*event.Event{{Seq: 1, Kind: event.KindModify, Device: "rxe0", QPN: 17}}}
	reads := 0
	s := rdmanl.Merge(src, rdmanl.MergeOptions{Every: 20 * time.Millisecond, Read: func() (rdmanl.Snapshot, error) {
		reads++
		snap := rdmanl.Snapshot{Boot: uint64(reads) * 1e9, QPs: []rdmanl.QP{rc(17, event.MigRearm)}}
		if reads == 1 {
			snap.QPs = append(snap.QPs, rc(18, event.MigArmed))
		}
		return snap, nil
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var got []*event.Event
	for len(got) < 6 {
		e, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		got = append(got, e)
	}
	want := []struct {
		kind event.Kind
		qpn  uint32
		op   event.TruthOp
	}{{event.KindTruth, 17, event.TruthRead}, {event.KindTruth, 18, event.TruthRead}, {event.KindModify, 17, 0},
		{event.KindTruth, 17, event.TruthRead}, {event.KindTruth, 18, event.TruthGone}, {event.KindTruth, 17, event.TruthRead}}
	for i, w := range want {
		e := got[i]
		if e.Kind != w.kind || e.QPN != w.qpn || (w.op != 0 && e.Truth.Op != w.op) {
			t.Fatalf("event %d: %v qpn %d %+v, want %v qpn %d op %v", i, e.Kind, e.QPN, e.Truth, w.kind, w.qpn, w.op)
		}
	}
	if r := got[0]; r.Time != time.Unix(0, int64(r.Boot)+int64(time.Hour)) || r.PID != 9 || r.Comm != "app" || r.Seq != 0 {
		t.Errorf("reading %+v: want the wall clock from the source's offset, the owner, seq 0", r)
	}
	if s.Stats().Events != 7 {
		t.Error("Stats must be the source's")
	}
}

// After Close no reading is taken: the source drains to io.EOF.
func TestCloseStopsReadings(t *testing.T) {
	src := &live{}
	reads := 0
	s := rdmanl.Merge(src, rdmanl.MergeOptions{Every: time.Millisecond, Read: func() (rdmanl.Snapshot, error) {
		reads++
		return rdmanl.Snapshot{Boot: 1, QPs: []rdmanl.QP{rc(17, event.MigArmed)}}, nil
	}})
	if e, err := s.Next(context.Background()); err != nil || e.Kind != event.KindTruth {
		t.Fatalf("first Next: %v %v", e, err)
	}
	s.Close()
	if _, err := s.Next(context.Background()); !errors.Is(err, io.EOF) || reads != 1 || !src.closed {
		t.Fatalf("after Close: %v, %d reads, source closed %v", err, reads, src.closed)
	}
}

// A failing read is reported once per distinct error and the stream goes on.
func TestReadErrorsWarnedOnce(t *testing.T) {
	var warned []error
	src := &live{}
	s := rdmanl.Merge(src, rdmanl.MergeOptions{Every: 5 * time.Millisecond, Warn: func(err error) { warned = append(warned, err) },
		Read: func() (rdmanl.Snapshot, error) { return rdmanl.Snapshot{}, errors.New("no rdma netlink") }})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Millisecond)
	defer cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next: %v", err)
	}
	if len(warned) != 1 || warned[0].Error() != "ground truth: reading rdma netlink: no rdma netlink" {
		t.Fatalf("warnings %v: want one", warned)
	}
	if rdmanl.Merge(src, rdmanl.MergeOptions{Read: func() (rdmanl.Snapshot, error) { return rdmanl.Snapshot{}, nil }}) != event.Source(src) {
		t.Error("an interval of 0 must return the source itself")
	}
}

// OnRead sees every reading, snapshot or error; a QP the source's events
// are about that the next snapshot does not list is reported gone.
func TestOnReadAndQPsTheSourceSaw(t *testing.T) {
	src := &live{es: []*event.Event{{Seq: 1, Kind: event.KindQPCreate, Device: "rxe0", QPN: 40, Boot: 1, Life: &event.QPLife{}}}}
	var reads []error
	boot := uint64(0)
	s := rdmanl.Merge(src, rdmanl.MergeOptions{Every: time.Millisecond, OnRead: func(_ rdmanl.Snapshot, err error) { reads = append(reads, err) },
		Read: func() (rdmanl.Snapshot, error) {
			boot += 10
			if boot == 20 {
				return rdmanl.Snapshot{}, errors.New("busy")
			}
			return rdmanl.Snapshot{Boot: boot}, nil
		}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var gone *event.Event
	for gone == nil {
		e, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("no gone reading for rxe0/40: %v", err)
		}
		if e.Kind == event.KindTruth && e.Truth.Op == event.TruthGone {
			gone = e
		}
	}
	if gone.QPN != 40 || gone.Boot != 30 {
		t.Errorf("gone %+v: want rxe0/40 at the first snapshot after its create", gone)
	}
	if len(reads) != 3 || reads[0] != nil || reads[1] == nil || reads[2] != nil {
		t.Errorf("OnRead saw %v: want ok, the error, ok", reads)
	}
}
