package apm

import (
	"github.com/apmwatch/apmwatch/event"
)

// A modify of the APM attributes in progress. A rearm or an alternate load
// is a firmware command, and one can block for up to a minute (mlx5's
// command timeout is 60 s); its record is stamped at its entry and comes at
// its return. A call that entered before a deadline is judged by its
// entry: while it is in progress (its event.KindModifyEntry seen, its
// modify record not yet), the deadlines it could meet wait for it, at most
// Config.CallWait from its entry. Its record then decides, as if it had
// come on time; one that never comes leaves the deadline judged, with the
// call named in the evidence.

// call is one modify in progress on a QP: the thread that made it and its
// entry stamp.
type call struct {
	tid uint32
	at  uint64
}

// maxCalls bounds the calls kept per QP: a QP is modified by one thread
// at a time (ib_uverbs and the ULPs serialise on the QP), so a few cover
// any real case; past it the oldest is forgotten.
const maxCalls = 4

// entered records a call in progress.
func (m *Model) entered(q *qp, ev *event.Event) {
	x := q.ax()
	if len(x.calls) == maxCalls {
		x.calls = append(x.calls[:0], x.calls[1:]...)
	}
	x.calls = append(x.calls, call{tid: ev.TID, at: ev.Boot})
}

// returned ends the calls a modify record completes: the same thread's,
// entered at or before the record's stamp (the same stamp, or the exit's
// when the entry stamp was lost). A deadline that waited for them is
// judged again now.
func (m *Model) returned(slot int32, q *qp, ev *event.Event) {
	x := q.x
	if x == nil || len(x.calls) == 0 {
		return
	}
	kept := x.calls[:0]
	for _, c := range x.calls {
		if c.tid != ev.TID || c.at > ev.Boot {
			kept = append(kept, c)
		}
	}
	if len(kept) == len(x.calls) {
		return
	}
	clear(x.calls[len(kept):])
	x.calls = kept
	if len(kept) == 0 {
		x.calls = nil
	}
	m.wake(slot, q, ev.Boot)
}

// callHold returns, for a deadline dl judged at at, the time to judge it
// instead while a call that entered before dl is still in progress: its
// entry plus Config.CallWait. 0: nothing holds it.
func (m *Model) callHold(q *qp, dl, at uint64) uint64 {
	x := q.x
	if x == nil {
		return 0
	}
	var hold uint64
	for _, c := range x.calls {
		if c.at <= dl {
			if until := c.at + uint64(m.cfg.CallWait); until > at {
				hold = max(hold, until)
			}
		}
	}
	return hold
}

// unreturned is the oldest call in progress that entered at or before dl,
// for the evidence of a deadline judged without it.
func (q *qp) unreturned(dl uint64) (call, bool) {
	if q.x == nil {
		return call{}, false
	}
	for _, c := range q.x.calls {
		if c.at <= dl {
			return c, true
		}
	}
	return call{}, false
}
