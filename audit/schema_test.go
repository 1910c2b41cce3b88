package audit

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/findingline/findinglinetest"
)

// The finding log's lines, a finding and its resolution as the daemon
// writes them, and the lines its sink (the NATS publisher) is handed, are
// lines of the one finding schema.
func TestFindingLogMatchesSchema(t *testing.T) {
	sink := &recSink{devices: map[string]int{}}
	h := newHarness(t, func(c *Config) { c.Sink = sink })
	h.daemon()
	b := h.feedMissedRearm()
	h.lines(1)
	b.After(5 * time.Second)
	b.LoadAltRearm(17, apmtest.PathC)
	h.boot.Store(b.Now() + uint64(time.Second))
	h.feed(b.Steps[len(b.Steps)-1:])
	h.lines(2)
	raw, err := os.ReadFile(h.cfg.Findings)
	if err != nil {
		t.Fatal(err)
	}
	if n := findinglinetest.Lines(t, raw); n != 2 {
		t.Errorf("checked %d lines of the finding log, want 2", n)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.lines) != 2 {
		t.Errorf("the sink got %d lines, want 2", len(sink.lines))
	}
	for _, l := range sink.lines {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if err := findinglinetest.Check(b); err != nil {
			t.Errorf("the sink's line: %v\n%s", err, b)
		}
	}
}
