package postmortem

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Deadlines are judged up to when the recording stopped (the file's last
// write), not beyond, and not only up to the last event.
func TestDeadlinesJudgedUntilRecordingEnds(t *testing.T) {
	for _, c := range []struct {
		end  float64 // seconds of Boot when the file was last written
		want int     // missed-rearm findings
	}{
		{2.5, 0}, // stopped 0.5 s after the migration: cannot tell
		{9, 1},   // quiet for 7 s after it: the 2 s deadline passed unseen
	} {
		b := newHost(0)
		connect(b, 7, 8, 1)
		b.After(time.Second).PathMig(7) // at Boot 2 s; the last event
		r := run(t, Options{}, write(t, t.TempDir(), "x.rec", "h", b, uint64(c.end*float64(time.Second))))
		if got := r.Summary.Findings["missed-rearm"]; got != c.want {
			t.Errorf("recording ending at %vs: %d missed-rearm, want %d", c.end, got, c.want)
		}
	}
}

func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	s := &stream{label: "host-a", size: 1000}
	s.hdr.Created = t0
	s.mtime = t0.Add(10 * time.Second)
	p := newProgress(&buf, []*stream{s})
	p.tick(s, t0.Add(5*time.Second))
	p.done()
	out := buf.String()
	if !strings.Contains(out, "replaying host-a") || !strings.Contains(out, " 50% ") || !strings.HasSuffix(out, "\r\033[K") {
		t.Fatalf("progress output %q", out)
	}
	var none *progress
	none.tick(s, t0) // no terminal: nothing, no panic
	q := newProgress(nil, nil)
	q.tick(s, t0)
	if q.drawn {
		t.Fatal("drew without a writer")
	}
}
