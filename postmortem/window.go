package postmortem

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrEmptyWindow is a --until before --since: the window holds nothing.
var ErrEmptyWindow = errors.New("--until is before --since: the window holds nothing")

func invertedError(since, until time.Time) error {
	return fmt.Errorf("%w (since %s, until %s)", ErrEmptyWindow, since.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano))
}

// String is the bound as a flag gives it.
func (b Bound) String() string {
	switch {
	case !b.Set:
		return ""
	case !b.Abs.IsZero():
		return b.Abs.Format(time.RFC3339Nano)
	case b.ago:
		return "-" + b.Ago.String()
	}
	return "+" + b.Rel.String()
}

// checkWindow refuses a window that is inverted whatever the recordings:
// both bounds absolute, both after the first event, or both before now.
// Bounds of two forms are compared once the recordings are read (Run).
func checkWindow(since, until Bound) error {
	if !since.Set || !until.Set {
		return nil
	}
	now := time.Unix(1<<40, 0) // any fixed instant: only the difference counts
	same := !since.Abs.IsZero() && !until.Abs.IsZero() ||
		since.FromFirst() && until.FromFirst() ||
		since.ago && until.ago
	if same && until.Time(now, now).Before(since.Time(now, now)) {
		return fmt.Errorf("%w (--since %s, --until %s)", ErrEmptyWindow, since, until)
	}
	return nil
}

// window is the report's time window: the bounds against the first event
// replayed and now; zero times for no bound.
func window(ss []*stream, o Options) (since, until time.Time) {
	var first time.Time
	for _, s := range ss {
		if s.res.Events > 0 {
			if t := s.wall(s.firstBoot()); first.IsZero() || t.Before(first) {
				first = t
			}
		}
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	return o.Since.Time(first, now), o.Until.Time(first, now)
}

// unmatched says which of the report's filters match nothing in the
// recordings (a device or QPN no QP of them has), and, when every filter
// matches something, whether together they left nothing to show.
func unmatched(ss []*stream, r *Report, o Options) []string {
	var out []string
	devs, qpns := map[string]bool{}, map[uint32]bool{}
	for _, s := range ss {
		for _, h := range s.h.all {
			devs[h.device], qpns[h.qpn] = true, true
		}
	}
	for _, f := range r.Findings {
		devs[f.QP.Device], qpns[f.QP.QPN] = true, true
	}
	for _, d := range o.Devices {
		if !devs[d] {
			out = append(out, fmt.Sprintf("--device %s: no QP of the recordings is on this device", d))
		}
	}
	for _, q := range o.QPNs {
		if !qpns[q] {
			out = append(out, fmt.Sprintf("--qpn %d: no QP of the recordings has this number", q))
		}
	}
	filtered := len(o.Devices) > 0 || len(o.QPNs) > 0 || o.Since.Set || o.Until.Set
	if len(out) == 0 && filtered && len(r.Findings) == 0 && len(r.QPs) == 0 {
		var flags []string
		for _, f := range []struct {
			name string
			set  bool
		}{{"--device", len(o.Devices) > 0}, {"--qpn", len(o.QPNs) > 0}, {"--since", o.Since.Set}, {"--until", o.Until.Set}} {
			if f.set {
				flags = append(flags, f.name)
			}
		}
		out = append(out, strings.Join(flags, ", ")+": nothing of the recordings matches: no finding and no QP shown")
	}
	return out
}
