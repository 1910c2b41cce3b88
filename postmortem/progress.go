package postmortem

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/internal/escape"
)

// progress draws a one-line bar on a terminal while streams replay. The
// position inside a stream is estimated from its events' times between
// the file's creation and its last write.
type progress struct {
	w           io.Writer
	total, past int64
	last        time.Time
	events      uint64
	drawn       bool
}

func newProgress(w io.Writer, ss []*stream) *progress {
	p := &progress{w: w}
	for _, s := range ss {
		p.total += s.size
	}
	return p
}

func (p *progress) tick(s *stream, t time.Time) {
	if p == nil || p.w == nil {
		return
	}
	p.events += 1024
	now := time.Now()
	if now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	frac := 0.0
	if span := s.mtime.Sub(s.hdr.Created); span > 0 {
		frac = min(1, max(0, float64(t.Sub(s.hdr.Created))/float64(span)))
	}
	p.draw(escape.Text(s.label), float64(p.past)+frac*float64(s.size))
}

func (p *progress) draw(label string, at float64) {
	pct := 1.0
	if p.total > 0 {
		pct = min(1, at/float64(p.total))
	}
	n := int(pct * 30)
	fmt.Fprintf(p.w, "\rreplaying %-16.16s [%s%s] %3.0f%% %d events", label,
		strings.Repeat("=", n), strings.Repeat(" ", 30-n), pct*100, p.events)
	p.drawn = true
}

func (p *progress) finished(s *stream) {
	if p == nil {
		return
	}
	p.past += s.size
}

// done erases the bar.
func (p *progress) done() {
	if p != nil && p.w != nil && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
