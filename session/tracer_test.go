package session

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
)

// quietSource is a fakeSource that says when it has handed out its live
// events and blocks.
type quietSource struct {
	*fakeSource
	quiet   chan struct{}
	once    sync.Once
	onClose func() // called as Close begins
}

func (s *quietSource) Close() error {
	if s.onClose != nil {
		s.onClose()
	}
	return s.fakeSource.Close()
}

func newQuiet(f *fakeSource) *quietSource {
	return &quietSource{fakeSource: f, quiet: make(chan struct{})}
}

func (s *quietSource) Next(ctx context.Context) (*event.Event, error) {
	if len(s.live) == 0 && !s.closed {
		s.once.Do(func() { close(s.quiet) })
	}
	return s.fakeSource.Next(ctx)
}

// waitFor polls until ok holds, failing after a generous time.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

// runTrace runs RunTrace until cancel; its error arrives on the channel.
func runTrace(cfg TraceConfig, src event.Source, out io.Writer) (context.CancelFunc, <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunTrace(ctx, cfg, TraceDeps{Open: func() (event.Source, error) { return src, nil },
			Boot: func() uint64 { return 10 * sec }, Stdout: out, Stderr: io.Discard})
	}()
	return cancel, done
}

// Output is buffered, but a line reaches the output while the trace runs
// once the stream goes quiet, with no event after it: events and the
// findings judged on them, in both formats, with the model and without.
func TestTraceFlushesWhileIdle(t *testing.T) {
	for _, c := range []struct {
		output     string
		noFindings bool
		want       []string
	}{
		{"json", false, []string{`"kind":"qp-event"`, `"seq":2,`, `"finding":"migration-error"`}},
		{"json", true, []string{`"kind":"qp-event"`, `"seq":2,`}},
		{"table", false, []string{"PATH_MIG_ERR", "migration-error"}},
	} {
		src := newQuiet(&fakeSource{live: []*event.Event{qpEvent(1, sec, 17, event.EvPathMig), qpEvent(2, sec+1, 18, event.EvPathMigErr)}})
		var out syncBuffer
		cancel, done := runTrace(TraceConfig{Output: c.output, NoFindings: c.noFindings, Model: apm.DefaultConfig()}, src, &out)
		waitFor(t, "-o "+c.output+": the lines", func() bool {
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					return false
				}
			}
			return true
		})
		select {
		case err := <-done:
			t.Fatalf("the trace ended (%v): the lines must come while it runs", err)
		default:
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// Lines still in the buffer are written when the trace is cancelled (before
// the probes are detached, which takes a while) or its duration passes,
// the drained tail with them.
func TestTraceFlushesOnEnd(t *testing.T) {
	defer func(d time.Duration) { flushDelay = d }(flushDelay)
	flushDelay = time.Hour
	src := newQuiet(newFake(3, 1))
	var out syncBuffer
	var atClose []string
	src.onClose = func() { atClose = append(atClose, out.String()) }
	cancel, done := runTrace(TraceConfig{Output: "json", Model: apm.DefaultConfig()}, src, &out)
	<-src.quiet
	time.Sleep(3 * advanceEvery) // the model's clock moves on; nothing is due
	if out.String() != "" {
		t.Fatalf("written before a flush was due:\n%s", out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), `"kind":"modify"`); n != 4 {
		t.Errorf("%d lines after cancel, want 3 live and 1 drained:\n%s", n, out.String())
	}
	if len(atClose) == 0 || strings.Count(atClose[0], `"kind":"modify"`) != 3 {
		t.Errorf("when the source was closed, the output held %q: want the 3 live lines", atClose)
	}
	var b syncBuffer
	err := RunTrace(context.Background(), TraceConfig{Output: "table", Duration: 50 * time.Millisecond, NoFindings: true},
		TraceDeps{Open: func() (event.Source, error) { return newFake(2, 1), nil }, Stdout: &b, Stderr: io.Discard})
	if err != nil || strings.Count(b.String(), "rxe") != 3 {
		t.Errorf("--duration: %v, want 3 rows:\n%s", err, b.String())
	}
}

// A writer that fails ends the trace with "writing output": when the idle
// flush fails while the trace runs, and when the last lines are written.
func TestTraceReportsWriteError(t *testing.T) {
	broken := errors.New("broken pipe")
	src := newQuiet(newFake(2, 0))
	cancel, done := runTrace(TraceConfig{Output: "json", NoFindings: true}, src, failing{broken})
	defer cancel()
	select {
	case err := <-done:
		if !errors.Is(err, broken) || !strings.HasPrefix(err.Error(), "writing output: ") {
			t.Errorf("idle flush: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the trace goes on writing to a broken output")
	}
	defer func(d time.Duration) { flushDelay = d }(flushDelay)
	flushDelay = time.Hour
	for _, format := range []string{"json", "table"} {
		err := RunTrace(context.Background(), TraceConfig{Output: format, Duration: 30 * time.Millisecond, Model: apm.DefaultConfig()},
			TraceDeps{Open: func() (event.Source, error) { return newFake(2, 1), nil }, Stdout: failing{broken}, Stderr: io.Discard})
		if !errors.Is(err, broken) || !strings.HasPrefix(err.Error(), "writing output: ") {
			t.Errorf("-o %s, at the end: %v", format, err)
		}
	}
}

type failing struct{ err error }

func (f failing) Write([]byte) (int, error) { return 0, f.err }
