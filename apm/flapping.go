package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// flapping: FlapCount migrations within FlapWindow, one finding per burst
// (a burst ends after a whole window without a migration). Only real
// migrations count: a PATH_MIG on a QP that was not armed is no migration,
// and a migration software forced (with its PATH_MIG, raised before or
// after the modify returned) is no path failing.

const remedyFlap = "the paths keep failing: check links, cables and the SM; do not rearm onto the path the QP just left; load an alternate on a different route, then rearm"

// unflap takes back a migration counted before it turned out to be a
// forced one (its PATH_MIG was raised inside the modify call). A finding
// it already completed stays: the model judges inputs in stamp order.
func (m *Model) unflap(q *qp, r ref) {
	x := q.ax()
	for i, v := range x.migs {
		if v == r {
			x.migs = append(x.migs[:i], x.migs[i+1:]...)
			return
		}
	}
}

// flap counts one migration in the sliding window.
func (m *Model) flap(q *qp, ev *event.Event) {
	x := q.ax()
	n, win := m.cfg.FlapCount, uint64(m.cfg.FlapWindow)
	if len(x.migs) > 0 && ev.Boot > x.migs[len(x.migs)-1].boot && ev.Boot-x.migs[len(x.migs)-1].boot > win {
		x.flapping = false // quiet for a whole window: a new burst may start
	}
	if len(x.migs) == n {
		copy(x.migs, x.migs[1:])
		x.migs = x.migs[:n-1]
	}
	x.migs = append(x.migs, refOf(ev))
	first, last := x.migs[0].boot, x.migs[0].boot
	for _, r := range x.migs {
		first, last = min(first, r.boot), max(last, r.boot) // a late migration may be older than the others
	}
	if x.flapping || len(x.migs) < n || last-first > win {
		return
	}
	x.flapping = true
	f := Finding{Kind: Flapping, Remediation: remedyFlap, First: first, Last: last,
		Explanation: fmt.Sprintf("%d migrations within %v (limit %d in %v): the QP keeps failing over", n, since(first, last), n, m.cfg.FlapWindow)}
	for _, r := range x.migs {
		f.Evidence = append(f.Evidence, evd(r, "migration"))
	}
	m.emit(q, f)
}
