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

// marking is a live source with watermarks: it hands out its items (an
// event, or a mark when ev is nil) in order, then waits.
type marking struct {
	live
	items []markItem
}

type markItem struct {
	ev   *event.Event
	mark uint64
}

func (m *marking) NextMark(ctx context.Context) (*event.Event, uint64, error) {
	if len(m.items) > 0 {
		it := m.items[0]
		m.items = m.items[1:]
		return it.ev, it.mark, nil
	}
	e, err := m.live.Next(ctx)
	return e, 0, err
}

func (m *marking) WantMark(uint64) {}

// A reading waits for the events stamped before it that the source still
// queues (a consumer behind a storm): a PATH_MIG stamped before a reading
// that shows MIGRATED reaches the model first. The mark that passes the
// reading's stamp releases it, and comes right after it.
func TestReadingWaitsForEarlierEvents(t *testing.T) {
	pm := &event.Event{Seq: 1, Kind: event.KindQPEvent, Device: "rxe0", QPN: 17, Boot: 8}
	after := &event.Event{Seq: 2, Kind: event.KindModify, Device: "rxe0", QPN: 17, Boot: 11}
	src := &marking{items: []markItem{{ev: pm}, {mark: 9}, {mark: 12}, {ev: after}, {mark: 13}}}
	reads := 0
	s := rdmanl.Merge(src, rdmanl.MergeOptions{Every: time.Millisecond, Read: func() (rdmanl.Snapshot, error) {
		reads++
		return rdmanl.Snapshot{Boot: uint64(reads) * 10, QPs: []rdmanl.QP{rc(17, event.MigMigrated)}}, nil
	}})
	m := s.(event.Marker)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var got []string
	for len(got) < 6 {
		e, mark, err := m.NextMark(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		switch {
		case mark != 0:
			got = append(got, "mark")
		case e.Kind == event.KindTruth:
			got = append(got, "reading")
		default:
			got = append(got, "event")
		}
		time.Sleep(2 * time.Millisecond) // the next reading is due: none is taken while one is held
	}
	want := []string{"event", "mark", "reading", "mark", "event", "mark"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	if reads != 2 { // the second (stamped 20) is held: no third while it is
		t.Errorf("%d readings taken, want 2: none while one is held", reads)
	}
}

// An event stamped after the reading releases it too (the ring buffer
// hands records out in stamp order): the reading goes right before it.
func TestReadingBeforeALaterEvent(t *testing.T) {
	later := &event.Event{Seq: 1, Kind: event.KindQPEvent, Device: "rxe0", QPN: 17, Boot: 11}
	src := &marking{items: []markItem{{ev: later}}}
	s := rdmanl.Merge(src, rdmanl.MergeOptions{Every: time.Hour, Read: func() (rdmanl.Snapshot, error) {
		return rdmanl.Snapshot{Boot: 10, QPs: []rdmanl.QP{rc(17, event.MigArmed)}}, nil
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var kinds []event.Kind
	for len(kinds) < 2 {
		e, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", kinds, err)
		}
		kinds = append(kinds, e.Kind)
	}
	if kinds[0] != event.KindTruth || kinds[1] != event.KindQPEvent {
		t.Fatalf("%v, want the reading, then the event stamped after it", kinds)
	}
}

// A source that is closed drains without marks: a reading still held goes
// before the first event stamped after it, or at the very end.
func TestHeldReadingAtTheEnd(t *testing.T) {
	src := &marking{}
	s := rdmanl.Merge(src, rdmanl.MergeOptions{Every: time.Hour, Read: func() (rdmanl.Snapshot, error) {
		return rdmanl.Snapshot{Boot: 10, QPs: []rdmanl.QP{rc(17, event.MigArmed)}}, nil
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next before any mark: %v, want no reading yet", err)
	}
	src.items = []markItem{{ev: &event.Event{Seq: 1, Kind: event.KindModify, Device: "rxe0", QPN: 17, Boot: 9}},
		{ev: &event.Event{Seq: 2, Kind: event.KindQPEvent, Device: "rxe0", QPN: 17, Boot: 11}}}
	s.Close()
	var kinds []event.Kind
	for {
		e, err := s.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, e.Kind)
	}
	if len(kinds) != 3 || kinds[0] != event.KindModify || kinds[1] != event.KindTruth || kinds[2] != event.KindQPEvent {
		t.Fatalf("after Close: %v, want the event stamped before the reading, the reading, the one after", kinds)
	}
	src.items = nil
	s = rdmanl.Merge(&marking{}, rdmanl.MergeOptions{Every: time.Hour, Read: func() (rdmanl.Snapshot, error) {
		return rdmanl.Snapshot{Boot: 10, QPs: []rdmanl.QP{rc(17, event.MigArmed)}}, nil
	}})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	s.Next(ctx2) // takes the reading and holds it
	s.Close()
	if e, err := s.Next(context.Background()); err != nil || e.Kind != event.KindTruth {
		t.Fatalf("at the end of an empty source: %v %v, want the reading", e, err)
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("after the reading: %v, want io.EOF", err)
	}
}
