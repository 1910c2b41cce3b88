package postmortem

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Bound is a --since or --until value, one of three forms (docs/postmortem.md,
// "Time windows"): an absolute time (RFC 3339), "+D" after the first
// event replayed, or "-D" before now. A bare duration "D" is read as the
// use's old meaning (BareFromFirst for files, BareBeforeNow for --nats) for
// one release, with a warning.
type Bound struct {
	Abs time.Time
	Rel time.Duration // after the first event (+D)
	Ago time.Duration // before now (-D)
	Set bool
	ago bool
}

// BareMeaning says how a bare duration reads in one use.
type BareMeaning int

const (
	BareFromFirst BareMeaning = iota // recordings: an offset from the first event
	BareBeforeNow                    // --nats: a duration before now
)

// ParseBound parses a --since or --until value; "" is no bound. warning is
// set when the value used the deprecated bare form: print it once.
func ParseBound(flag, s string, bare BareMeaning) (b Bound, warning string, err error) {
	if s == "" {
		return Bound{}, "", nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Bound{Abs: t, Set: true}, "", nil
	}
	sign := s[0]
	d, perr := time.ParseDuration(strings.TrimLeft(s, "+-"))
	if perr != nil || d < 0 || strings.HasPrefix(s, "--") || strings.HasPrefix(s, "+-") || strings.HasPrefix(s, "-+") {
		return Bound{}, "", fmt.Errorf("bad %s %q: want RFC 3339 (2026-01-02T15:04:05Z), +DURATION after the first event (+30s) or -DURATION before now (-1h)", flag, s)
	}
	switch sign {
	case '+':
		return Bound{Rel: d, Set: true}, "", nil
	case '-':
		return Bound{Ago: d, Set: true, ago: true}, "", nil
	}
	if bare == BareBeforeNow {
		return Bound{Ago: d, Set: true, ago: true}, fmt.Sprintf("%s %s: a bare duration reads as -%s (before now); write -%s: the bare form goes in the next release", flag, s, s, s), nil
	}
	return Bound{Rel: d, Set: true}, fmt.Sprintf("%s %s: a bare duration reads as +%s (after the first event); write +%s, or -%s for before now: the bare form goes in the next release", flag, s, s, s, s), nil
}

// ErrRelativeToFirst is a +DURATION where there is no first event to count
// from (--nats).
var ErrRelativeToFirst = errors.New("+DURATION counts from the first event of recordings: give RFC 3339 or -DURATION (before now)")

// Time is the bound's time: first is the first event replayed, now the
// time the command started. The zero time for no bound.
func (b Bound) Time(first, now time.Time) time.Time {
	switch {
	case !b.Set:
		return time.Time{}
	case !b.Abs.IsZero():
		return b.Abs
	case b.ago:
		return now.Add(-b.Ago)
	}
	return first.Add(b.Rel)
}

// FromFirst says whether the bound counts from the first event (+D).
func (b Bound) FromFirst() bool { return b.Set && b.Abs.IsZero() && !b.ago }
