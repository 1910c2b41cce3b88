package session

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
)

// lagging is a source with watermarks whose items come from a channel: a
// test plays a consumer that is behind the kernel's clock.
type lagging struct {
	fakeSource
	items chan markItem
	done  chan struct{}
}

func (s *lagging) Close() error {
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	return nil
}

type markItem struct {
	ev   *event.Event
	mark uint64
}

func (s *lagging) NextMark(ctx context.Context) (*event.Event, uint64, error) {
	select {
	case it := <-s.items:
		return it.ev, it.mark, nil
	case <-s.done:
		return nil, 0, io.EOF
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

func (s *lagging) Next(ctx context.Context) (*event.Event, error) {
	for {
		e, mark, err := s.NextMark(ctx)
		if err != nil || mark == 0 {
			return e, err
		}
	}
}

func (s *lagging) WantMark(uint64) {}

// From a source with watermarks the model's clock moves only by them: the
// clock (10 s here) is far past a missed-rearm deadline (4 s), but the
// source has delivered only up to 3 s, and a rearm stamped before the
// deadline may still be queued; the deadline is judged when a mark passes
// it, never by the clock.
func TestTraceJudgesByMarksNotTheClock(t *testing.T) {
	src := &lagging{items: make(chan markItem, 8), done: make(chan struct{})}
	var out syncBuffer
	cancel, done := runTrace(TraceConfig{Output: "json", Model: apm.DefaultConfig()}, src, &out)
	src.items <- markItem{mark: sec}
	src.items <- markItem{ev: qpEvent(1, 2*sec, 17, event.EvPathMig)}
	src.items <- markItem{mark: 3 * sec}
	waitFor(t, "the PATH_MIG shown", func() bool { return strings.Contains(out.String(), `"event":"PATH_MIG"`) })
	time.Sleep(4 * advanceEvery)
	if strings.Contains(out.String(), "missed-rearm") {
		t.Fatalf("judged by the clock before a mark passed the deadline:\n%s", out.String())
	}
	src.items <- markItem{mark: 5 * sec}
	waitFor(t, "missed-rearm once a mark passed the deadline", func() bool { return strings.Contains(out.String(), "missed-rearm") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
