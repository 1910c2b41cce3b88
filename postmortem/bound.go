package postmortem

import (
	"fmt"
	"strings"
	"time"
)

// Bound is a --since or --until value: an absolute time (RFC 3339) or an
// offset from the first event replayed ("30s", "+1m30s").
type Bound struct {
	Abs time.Time
	Rel time.Duration
	Set bool
}

// ParseBound parses a --since or --until value; "" is no bound.
func ParseBound(s string) (Bound, error) {
	if s == "" {
		return Bound{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Bound{Abs: t, Set: true}, nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(s, "+"))
	if err != nil || d < 0 {
		return Bound{}, fmt.Errorf("bad time %q: want RFC 3339 (2026-01-02T15:04:05Z) or an offset from the first event (30s)", s)
	}
	return Bound{Rel: d, Set: true}, nil
}

func (b Bound) resolve(first time.Time) time.Time {
	switch {
	case !b.Set:
		return time.Time{}
	case !b.Abs.IsZero():
		return b.Abs
	}
	return first.Add(b.Rel)
}
