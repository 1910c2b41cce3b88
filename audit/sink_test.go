package audit

import (
	"sync"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// recSink records what the daemon hands a Sink.
type recSink struct {
	mu      sync.Mutex
	devices map[string]int
	lines   []findingline.Line
	ticks   int
}

func (s *recSink) Observe(e *event.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devices[e.Device]++
}

func (s *recSink) Line(l findingline.Line) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, l)
}

func (s *recSink) Tick(time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ticks++
}

func TestSinkGetsOneDeviceAndTheHostNamedByConfig(t *testing.T) {
	sink := &recSink{devices: map[string]int{}}
	h := newHarness(t, func(c *Config) { c.Device, c.Host, c.Sink = "rxe0", "nodeA", sink })
	h.daemon()
	other := apmtest.New()
	other.Device = "rxe1"
	missedRearm(other)
	b := apmtest.New()
	b.Device = "rxe0"
	missedRearm(b)
	h.feed(other.Steps)
	h.src.ch <- &event.Event{Kind: event.KindQPEvent, Boot: b.Now(), QPN: 17, QP: &event.QPEvent{Type: event.EvPathMig}} // no device
	h.feed(b.Steps)
	h.boot.Store(b.Now() + uint64(3*time.Second))
	ls := h.lines(1)
	if ls[0].QP.Device != "rxe0" || ls[0].Host != "nodeA" {
		t.Fatalf("finding line: %+v", ls[0])
	}
	h.stop()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.devices) != 1 || sink.devices["rxe0"] == 0 {
		t.Fatalf("events the sink saw, by device: %v", sink.devices)
	}
	if len(sink.lines) != 1 || sink.lines[0].Host != "nodeA" || sink.lines[0].QP.Device != "rxe0" || sink.ticks == 0 {
		t.Fatalf("sink lines %+v, ticks %d", sink.lines, sink.ticks)
	}
}

func TestScopeSnapshotKeepsOneDevice(t *testing.T) {
	read := func() (rdmanl.Snapshot, error) {
		return rdmanl.Snapshot{QPs: []rdmanl.QP{{Device: "rxe0", LQPN: 17}, {Device: "rxe1", LQPN: 17}},
			CMIDs: []rdmanl.CMID{{Device: "rxe1", LQPN: 17}}}, nil
	}
	s, err := scopeSnapshot("rxe0", read)()
	if err != nil || len(s.QPs) != 1 || s.QPs[0].Device != "rxe0" || len(s.CMIDs) != 0 {
		t.Fatalf("scoped: %+v, %v", s, err)
	}
	if s, _ := scopeSnapshot("", read)(); len(s.QPs) != 2 || len(s.CMIDs) != 1 {
		t.Fatalf("unscoped: %+v", s)
	}
}

// readingSink records the readings it is handed.
type readingSink struct {
	recSink
	readings chan []rdmanl.QP
}

func (s *readingSink) Reading(snap rdmanl.Snapshot) {
	select {
	case s.readings <- append([]rdmanl.QP(nil), snap.QPs...):
	default:
	}
}

// A sink that takes readings is handed each one as taken, within
// --device.
func TestReadingSinkGetsTheReadingsOfItsDevice(t *testing.T) {
	sink := &readingSink{recSink: recSink{devices: map[string]int{}}, readings: make(chan []rdmanl.QP, 16)}
	h := newHarness(t, func(c *Config) { c.Device, c.Sink, c.ReconcileInterval = "rxe0", sink, 100*time.Millisecond })
	h.qps.Store(&[]rdmanl.QP{{Device: "rxe0", LQPN: 17, RQPN: 18, Type: event.QPTypeRC}, {Device: "rxe1", LQPN: 17, Type: event.QPTypeRC}})
	h.daemon()
	defer h.stop()
	for deadline := time.After(5 * time.Second); ; {
		select {
		case qps := <-sink.readings:
			if len(qps) == 0 {
				continue // taken before the table was filled
			}
			if len(qps) != 1 || qps[0].Device != "rxe0" || qps[0].RQPN != 18 {
				t.Fatalf("reading: %+v", qps)
			}
			return
		case <-deadline:
			t.Fatal("no reading handed to the sink in 5s")
		}
	}
}
