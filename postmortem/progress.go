package postmortem

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/internal/escape"
)

// progressEvery is how often the bar is redrawn at most.
var progressEvery = 100 * time.Millisecond

// progress draws a one-line bar on a terminal while streams replay. The
// position is the bytes the replay has read out of the total bytes of the
// files given: a copied recording, whose file times say nothing of its
// events, moves the bar as well as the original.
type progress struct {
	w           io.Writer
	total, past int64 // bytes of every stream, of the streams replayed
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

// tick is called every 1024 events of s with the bytes of s read so far.
func (p *progress) tick(s *stream, read int64) {
	if p == nil || p.w == nil {
		return
	}
	p.events += 1024
	now := time.Now()
	if now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	p.draw(escape.Text(s.label), p.past+min(max(read, 0), s.size))
}

func (p *progress) draw(label string, at int64) {
	pct := 1.0
	if p.total > 0 {
		pct = min(1, float64(at)/float64(p.total))
	}
	n := int(pct * 30)
	fmt.Fprintf(p.w, "\rreplaying %-16.16s [%s%s] %3.0f%% %d events", label,
		strings.Repeat("=", n), strings.Repeat(" ", 30-n), pct*100, p.events)
	p.drawn = true
}

// finished counts s as read; the bar shows where that leaves the replay.
func (p *progress) finished(s *stream) {
	if p == nil {
		return
	}
	p.past += s.size
	if p.w != nil && p.drawn {
		p.draw(escape.Text(s.label), p.past)
	}
}

// done erases the bar.
func (p *progress) done() {
	if p != nil && p.w != nil && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
