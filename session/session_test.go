package session

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/output"
	"github.com/apmwatch/apmwatch/recording"
)

// fakeSource hands out live events until ctx is done, then, once closed,
// the events still "in the ring buffer" (tail) and io.EOF.
type fakeSource struct {
	live, tail []*event.Event
	closed     bool
	stats      event.Stats
}

func newFake(live, tail int) *fakeSource {
	f := &fakeSource{stats: event.Stats{Lost: 3, Events: uint64(live + tail)}}
	for i := 0; i < live+tail; i++ {
		e := &event.Event{Seq: uint64(i + 1), Kind: event.KindModify, Boot: uint64(i+1) * 1000,
			Device: []string{"rxe0", "rxe1"}[i%2], QPN: 17,
			Modify: &event.Modify{AttrMask: event.AttrPathMigState, MigState: event.MigRearm}}
		if i < live {
			f.live = append(f.live, e)
		} else {
			f.tail = append(f.tail, e)
		}
	}
	return f
}

func (f *fakeSource) Meta() event.Meta { return event.Meta{Host: "h1", Kernel: "6.12", Version: "t"} }
func (f *fakeSource) Stats() event.Stats {
	return f.stats
}
func (f *fakeSource) Close() error { f.closed = true; return nil }
func (f *fakeSource) Next(ctx context.Context) (*event.Event, error) {
	if len(f.live) > 0 {
		e := f.live[0]
		f.live = f.live[1:]
		return e, nil
	}
	if !f.closed {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if len(f.tail) > 0 {
		e := f.tail[0]
		f.tail = f.tail[1:]
		return e, nil
	}
	return nil, io.EOF
}

func readAll(t *testing.T, path string) ([]*event.Event, event.Stats) {
	t.Helper()
	r, err := recording.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []*event.Event
	for {
		e, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out, r.Stats()
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
}

func TestRecordDrainsAfterInterrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.rec")
	ready := filepath.Join(t.TempDir(), "ready")
	src := newFake(10, 5)
	f, err := output.ParseFilter([]string{"rxe0"}, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // the "SIGINT"
	defer cancel()
	var stderr bytes.Buffer
	res, err := Record(ctx, Config{Path: path, Filter: f, ReadyFile: ready},
		Deps{Open: func() (event.Source, error) { return src, nil }, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if res.Seen != 15 || res.Kept != 8 {
		t.Fatalf("seen %d kept %d, want 15 and 8 (the drained tail too)", res.Seen, res.Kept)
	}
	evs, st := readAll(t, path)
	if len(evs) != 8 || evs[len(evs)-1].Seq != 15 {
		t.Fatalf("recording holds %d events (last seq %d), want 8 ending with the drained seq 15", len(evs), evs[len(evs)-1].Seq)
	}
	for _, e := range evs {
		if e.Device != "rxe0" {
			t.Fatalf("filter not applied: %v", e.Key())
		}
	}
	if st.Lost != 3 || st.Events != 15 {
		t.Fatalf("recorded stats %+v, want the source's final counters", st)
	}
	if !strings.Contains(stderr.String(), "recorded 8 of 15 events") {
		t.Fatalf("summary: %q", stderr.String())
	}
}

func TestRecordDuration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.rec")
	start := time.Now()
	_, err := Record(context.Background(), Config{Path: path, Duration: 30 * time.Millisecond},
		Deps{Open: func() (event.Source, error) { return newFake(2, 1), nil }})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("duration did not end the session")
	}
	if evs, _ := readAll(t, path); len(evs) != 3 {
		t.Fatalf("%d events, want 3", len(evs))
	}
}

func TestRecordErrors(t *testing.T) {
	_, err := Record(context.Background(), Config{}, Deps{})
	if err == nil || err.Error() != "no recording file: give -w FILE" {
		t.Fatalf("got %v", err)
	}
	_, err = Record(context.Background(), Config{Path: "/nonexistent/dir/a.rec"},
		Deps{Open: func() (event.Source, error) { return newFake(1, 0), nil }})
	if err == nil || !strings.HasPrefix(err.Error(), "creating recording") {
		t.Fatalf("got %v", err)
	}
}

// TestTee plays the trace command's calls: Next until cancelled, Close,
// Next until EOF, Close again.
func TestTee(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.rec")
	src := newFake(4, 3)
	open := Tee(path, func() (event.Source, error) { return src, nil })
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	n := 0
	for {
		if _, err := s.Next(ctx); err != nil {
			break
		}
		n++
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := s.Next(context.Background()); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		n++
	}
	s.Close()
	if n != 7 {
		t.Fatalf("caller got %d events, want 7", n)
	}
	if evs, st := readAll(t, path); len(evs) != 7 || st.Lost != 3 {
		t.Fatalf("recording: %d events, stats %+v", len(evs), st)
	}
	if Tee("", nil) != nil {
		t.Fatal("no path: the open function itself")
	}
}
