package postmortem

import (
	"fmt"
	"math"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// Clock says how two recordings' times were put on one axis and how far
// that can be off.
type Clock struct {
	A      string `json:"a"`
	B      string `json:"b"`
	Method string `json:"method"` // "boottime" (one host, one boot) or "wall"
	// Lo and Hi bound B's clock minus A's clock, from CM MADs one side sent
	// and the other received (a MAD arrives after it left); nil: no bound.
	Lo        *time.Duration `json:"skew_lo_ns,omitempty"`
	Hi        *time.Duration `json:"skew_hi_ns,omitempty"`
	Exchanges int            `json:"exchanges"`
	Shift     time.Duration  `json:"shift_ns"` // applied to B's times
	Note      string         `json:"note"`
}

// boundClocks aligns every stream with the first one: one host's streams
// share CLOCK_BOOTTIME; other hosts' wall clocks are checked against the
// causal bounds from matched CM MADs and shifted by the least amount that
// satisfies them. It reports every pair of streams.
func boundClocks(ss []*stream) []Clock {
	var out []Clock
	for i := range ss {
		for j := i + 1; j < len(ss); j++ {
			out = append(out, clockOf(ss[i], ss[j], i == 0))
		}
	}
	return out
}

func clockOf(a, b *stream, apply bool) Clock {
	c := Clock{A: a.label, B: b.label}
	if a.offset == b.offset && sameClock(a, b) {
		c.Method = "boottime"
		c.Note = "same host and boot: one CLOCK_BOOTTIME, exact"
		return c
	}
	c.Method = "wall"
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	type wire struct {
		tid           uint64
		attr          uint16
		local, remote uint32
	}
	sent := func(s *stream) map[wire]int64 {
		m := map[wire]int64{}
		for _, d := range s.mads {
			if d.dir == event.MADSend {
				m[wire{d.tid, d.attr, d.local, d.remote}] = s.wall(d.boot).UnixNano()
			}
		}
		return m
	}
	sa, sb := sent(a), sent(b)
	for _, d := range b.mads { // a -> b: skew <= recv_b - send_a
		if t, ok := sa[wire{d.tid, d.attr, d.local, d.remote}]; ok && d.dir == event.MADRecv {
			hi = min(hi, b.wall(d.boot).UnixNano()-t)
			c.Exchanges++
		}
	}
	for _, d := range a.mads { // b -> a: skew >= send_b - recv_a
		if t, ok := sb[wire{d.tid, d.attr, d.local, d.remote}]; ok && d.dir == event.MADRecv {
			lo = max(lo, t-a.wall(d.boot).UnixNano())
			c.Exchanges++
		}
	}
	if lo != math.MinInt64 {
		v := time.Duration(lo)
		c.Lo = &v
	}
	if hi != math.MaxInt64 {
		v := time.Duration(hi)
		c.Hi = &v
	}
	var shift int64
	switch {
	case lo > hi:
		c.Note = "the MADs contradict each other (a clock stepped during the recording?): not shifted"
		return c
	case lo > 0:
		shift = lo
	case hi < 0:
		shift = hi
	}
	if apply && shift != 0 {
		b.shift -= time.Duration(shift)
		c.Shift = -time.Duration(shift)
	}
	switch {
	case c.Exchanges == 0:
		c.Note = "wall clocks, no CM MAD seen on both sides: as far off as the hosts' clock sync (NTP: typically under a few ms)"
	case c.Lo != nil && c.Hi != nil:
		c.Note = fmt.Sprintf("wall clocks; %s - %s within [%v, %v] from %d CM MADs", b.label, a.label, *c.Lo, *c.Hi, c.Exchanges)
	default:
		c.Note = fmt.Sprintf("wall clocks; one-way bound from %d CM MADs", c.Exchanges)
	}
	return c
}
