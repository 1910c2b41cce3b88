package recording

import "github.com/apmwatch/apmwatch/event"

// Loss is a stretch of a recording where records are known to be missing:
// events the recorded source lost (its ring buffer was full: the Lost
// counter of a stats record grew), or records the replay could not read
// (damaged frames, records that do not decode). From and To bound, in the
// source's CLOCK_BOOTTIME, when the missing records happened, widely
// enough to hold them: a finding whose window overlaps a Loss cannot
// claim that something did not happen in it.
type Loss struct {
	From, To uint64 // Boot; To is ^0 when the recording ended before a later record
	Lost     uint64 // events the source counted as lost (0 for damage alone)
	Damaged  uint64 // records the replay could not read
}

// maxLosses bounds the stretches kept; past it the last one widens.
const maxLosses = 4096

// lossSlack widens a stretch that ends at a stats record written before
// its counters were stamped (older recorders): the counters were read just
// after the last event before it was written.
const lossSlack = uint64(1e9)

// lossTrack follows, within one writer run (session), the events read and
// the stats records, to place each loss between two points in time.
type lossTrack struct {
	spans    []Loss
	lastBoot uint64 // Boot of the last event read
	prevAt   uint64 // when the previous stats record's counters were read (or the last event before it)
	prevLost uint64
	// the kernel's skipped probe runs (Stats.Missed), read on their own
	// schedule (Stats.MissedAt)
	prevMissedAt, prevMissed uint64
	damage                   *Loss // open: ends at the next event read
	on                       func(Loss)
}

// event notes an event read: it closes an open damaged stretch.
func (t *lossTrack) event(boot uint64) {
	if t.damage != nil {
		t.damage.To = max(boot, t.damage.From)
		t.add(*t.damage)
		t.damage = nil
	}
	if boot > t.lastBoot {
		t.lastBoot = boot
	}
}

// damaged notes records the replay could not read, at this point of the
// stream.
func (t *lossTrack) damaged() {
	if t.damage == nil {
		t.damage = &Loss{From: t.lastBoot}
	}
	t.damage.Damaged++
}

// stats notes a stats record of the current session.
func (t *lossTrack) stats(s event.Stats) {
	to := s.At
	if to == 0 {
		to = t.lastBoot + lossSlack
	}
	if s.Lost > t.prevLost {
		t.add(Loss{From: t.prevAt, To: max(to, t.prevAt), Lost: s.Lost - t.prevLost})
	}
	t.prevLost = s.Lost
	mto := s.MissedAt
	if mto == 0 {
		mto = to
	}
	if s.Missed > t.prevMissed {
		from := t.prevMissedAt
		if from == 0 {
			from = t.prevAt
		}
		t.add(Loss{From: from, To: max(mto, from), Lost: s.Missed - t.prevMissed})
	}
	t.prevMissed, t.prevMissedAt = s.Missed, mto
	t.prevAt = s.At
	if t.prevAt == 0 {
		t.prevAt = t.lastBoot
	}
}

// session starts a new writer run: its counters start from zero.
func (t *lossTrack) session() {
	t.end()
	t.prevLost, t.prevAt = 0, 0
	t.prevMissed, t.prevMissedAt = 0, 0
}

// end closes an open damaged stretch at the end of the input.
func (t *lossTrack) end() {
	if t.damage != nil {
		t.damage.To = ^uint64(0)
		t.add(*t.damage)
		t.damage = nil
	}
}

func (t *lossTrack) add(l Loss) {
	if t.on != nil {
		t.on(l)
	}
	if n := len(t.spans); n >= maxLosses {
		last := &t.spans[n-1]
		last.To = max(last.To, l.To)
		last.Lost += l.Lost
		last.Damaged += l.Damaged
		return
	}
	t.spans = append(t.spans, l)
}

// Losses returns the stretches of missing records read so far, in the
// order they were found.
func (r *Reader) Losses() []Loss {
	out := append([]Loss(nil), r.loss.spans...)
	if r.loss.damage != nil {
		open := *r.loss.damage
		open.To = ^uint64(0)
		out = append(out, open)
	}
	return out
}
