package collector

import (
	"slices"
	"sync"
	"time"

	"github.com/apmwatch/apmwatch/internal/boottime"
)

// Runs of the probes the kernel skipped: their events were never recorded
// and no ring buffer counter saw them.
//   - bpf_prog_info.recursion_misses (5.12+): fentry and fexit programs
//     skipped by their per-program recursion guard (a raw driver event in
//     the EQ interrupt on a CPU where the same program was running), and
//     from 6.7 kprobe programs skipped because another BPF program was
//     running on the CPU (bpf_prog_active);
//   - a kprobe link's missed count (6.7+): a kprobe hit inside another
//     kprobe's handler, or a kretprobe with no free instance (maxactive
//     exhausted: the return of a call in progress is never seen).
//
// Older kernels count neither; docs/events.md says so.

// missedEvery bounds how often the counters are read: one system call
// per program and per kprobe link.
const missedEvery = 250 * time.Millisecond

type missedReader struct {
	mu     sync.Mutex
	n, at  uint64    // the last reading, and when (CLOCK_BOOTTIME)
	when   time.Time // of the last reading
	closed uint64    // kprobe links' counts kept when they were closed
}

// read returns the kernel's count of skipped runs and when it was read,
// reading again when the last reading is older than missedEvery (or
// always, with force).
func (r *missedReader) read(l *loader, force bool) (n, at uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !force && !r.when.IsZero() && time.Since(r.when) < missedEvery {
		return r.n, r.at
	}
	n = r.closed + l.missed()
	if n < r.n {
		n = r.n // a counter read once is never taken back
	}
	r.n, r.at, r.when = n, boottime.Now(), time.Now()
	return r.n, r.at
}

// linksClosing keeps the kprobe links' counts before they are closed.
func (r *missedReader) linksClosing(l *loader) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed += l.linkMissed()
}

// missed sums the programs' and the kprobe links' counts.
func (l *loader) missed() uint64 {
	l.mu.Lock()
	colls := slices.Clone(l.colls)
	l.mu.Unlock()
	var n uint64
	for _, c := range colls {
		for _, p := range c.Programs {
			if st, err := p.Stats(); err == nil {
				n += st.RecursionMisses
			}
		}
	}
	return n + l.linkMissed()
}

func (l *loader) linkMissed() uint64 {
	l.mu.Lock()
	links := slices.Clone(l.links)
	l.mu.Unlock()
	var n uint64
	for _, lk := range links {
		info, err := lk.Info()
		if err != nil {
			continue
		}
		if pe := info.PerfEvent(); pe != nil {
			if k := pe.Kprobe(); k != nil {
				n += k.Missed
			}
		}
	}
	return n
}
