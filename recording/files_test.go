package recording

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

func readAll(t *testing.T, r *Reader) []*event.Event {
	t.Helper()
	var got []*event.Event
	for {
		e, err := r.Next(context.Background())
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
}

func TestRotationReadsBackAsOneStream(t *testing.T) {
	for name, opts := range modes() {
		t.Run(name, func(t *testing.T) {
			prefix := filepath.Join(t.TempDir(), "rec")
			opts.MaxBytes, opts.FlushInterval = 8<<10, -1
			w, err := Create(prefix, testMeta(), opts)
			if err != nil {
				t.Fatal(err)
			}
			evs := realisticEvents(21, 2000)
			for i, e := range evs {
				if err := w.Write(e); err != nil {
					t.Fatal(err)
				}
				if i%100 == 99 {
					w.WriteStats(event.Stats{Events: uint64(i + 1), Lost: uint64(i / 100)})
					w.Flush()
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			files := w.Files()
			if len(files) < 3 {
				t.Fatalf("only %d files: no rotation", len(files))
			}
			// Give them in a scrambled order: the headers put them right.
			shuffled := slices.Clone(files)
			slices.Reverse(shuffled)
			shuffled[0], shuffled[len(shuffled)/2] = shuffled[len(shuffled)/2], shuffled[0]
			r, err := Open(shuffled...)
			if err != nil {
				t.Fatal(err)
			}
			got := readAll(t, r)
			if !reflect.DeepEqual(got, evs) {
				t.Fatalf("read %d events, want %d in order", len(got), len(evs))
			}
			if ws := r.Warnings(); len(ws) != 0 {
				t.Errorf("warnings: %v", ws)
			}
			if s := r.Stats(); s.Events != 2000 || s.Lost != 19 {
				t.Errorf("stats %+v", s)
			}
			for i, h := range r.Headers() {
				if h.Segment != uint32(i) || h.Session != r.Headers()[0].Session {
					t.Errorf("header %d: segment %d session %x", i, h.Segment, h.Session)
				}
			}
		})
	}
}

func TestRotationKeepsTheNewestFiles(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "flight")
	w, err := Create(prefix, testMeta(), Options{MaxBytes: 4 << 10, MaxFiles: 3, FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	evs := realisticEvents(22, 3000)
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(prefix + ".*")
	if !reflect.DeepEqual(left, w.Files()) || len(left) != 3 {
		t.Fatalf("files left %v, writer says %v", left, w.Files())
	}
	r, err := Open(left...)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, r)
	if len(got) == 0 || !reflect.DeepEqual(got, evs[len(evs)-len(got):]) {
		t.Fatalf("read %d events: not the newest ones in order", len(got))
	}
	if ws := r.Warnings(); len(ws) != 0 {
		t.Errorf("warnings: %v", ws)
	}
}

func TestRotationByAge(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "aged")
	w, err := Create(prefix, testMeta(), Options{MaxAge: 20 * time.Millisecond, FlushInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	g := newRealistic(23, testMeta())
	deadline := time.Now().Add(5 * time.Second)
	for len(w.Files()) < 3 && time.Now().Before(deadline) {
		if err := w.Write(g.next()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(w.Files()) < 3 {
		t.Fatalf("no rotation by age: %v", w.Files())
	}
	r, err := Open(w.Files()...)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r); uint64(len(got)) != g.seq || len(r.Warnings()) != 0 {
		t.Fatalf("read %d of %d events, warnings %v", len(got), g.seq, r.Warnings())
	}
}

// TestSessionsOfOneHost: two runs of apmwatch on one host replay one after
// the other (by start time), and their stats add up.
func TestSessionsOfOneHost(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	var all []*event.Event
	for run := 0; run < 2; run++ {
		p := filepath.Join(dir, []string{"b-first", "a-second"}[run])
		w, err := Create(p, testMeta(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		evs := realisticEvents(uint64(30+run), 50)
		for _, e := range evs {
			w.Write(e)
		}
		w.WriteStats(event.Stats{Events: 50, Lost: 3, LostPerCPU: []uint64{1, 2}})
		w.Close()
		paths = append(paths, p)
		all = append(all, evs...)
		time.Sleep(2 * time.Millisecond) // distinct creation times
	}
	r, err := Open(paths[1], paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r); !reflect.DeepEqual(got, all) {
		t.Fatalf("read %d events not in run order", len(got))
	}
	if s := r.Stats(); s.Events != 100 || s.Lost != 6 || !reflect.DeepEqual(s.LostPerCPU, []uint64{2, 4}) {
		t.Errorf("stats %+v", s)
	}
}

func TestOpenManyFiles(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, meta event.Meta) string {
		p := filepath.Join(dir, name)
		w, err := Create(p, meta, Options{})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(realisticEvents(1, 1)[0])
		w.Close()
		return p
	}
	a := mk("a", testMeta())
	other := testMeta()
	other.Host = "node-b"
	b := mk("b", other)
	if _, err := Open(a, b); err == nil || !strings.Contains(err.Error(), "recordings of different hosts") {
		t.Errorf("two hosts: %v", err)
	}
	if _, err := Open(a, a); err == nil || !strings.Contains(err.Error(), "are the same segment 0") {
		t.Errorf("same file twice: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	r, err := Open(a, empty)
	if err != nil {
		t.Fatal(err)
	}
	if ws := r.Warnings(); len(ws) != 1 || ws[0].File != empty || !strings.Contains(ws[0].Msg, "empty file: file skipped") {
		t.Errorf("warnings %v", ws)
	}
	if got := readAll(t, r); len(got) != 1 {
		t.Errorf("read %d events", len(got))
	}
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("only an empty file: %v", err)
	}
}

// TestWriterConcurrentFlush runs a background flusher and Sync calls
// against writes (run with -race).
func TestWriterConcurrentFlush(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c")
	w, err := Create(p, testMeta(), Options{Compress: true, FlushInterval: time.Millisecond, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 20; i++ {
			w.Sync()
			time.Sleep(time.Millisecond)
		}
	}()
	evs := realisticEvents(40, 5000)
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r); !reflect.DeepEqual(got, evs) {
		t.Fatalf("read %d events", len(got))
	}
}

// TestKilledWriterLosesOnlyUnflushed: what a writer flushed is readable
// while it is still open (as after kill -9), with one warning.
func TestKilledWriterLosesOnlyUnflushed(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k")
	w, err := Create(p, testMeta(), Options{Compress: true, FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	evs := realisticEvents(41, 300)
	for _, e := range evs[:200] {
		w.Write(e)
	}
	w.Flush()
	for _, e := range evs[200:] {
		w.Write(e)
	}
	r, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r); !reflect.DeepEqual(got, evs[:200]) {
		t.Fatalf("read %d events, want the 200 flushed", len(got))
	}
	if ws := r.Warnings(); len(ws) != 1 || !strings.Contains(ws[0].Msg, "no end record") {
		t.Errorf("warnings %v", ws)
	}
	w.Close()
}
