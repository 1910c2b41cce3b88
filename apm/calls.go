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
// Config.CallWait from its entry. Only a call that could meet the deadline
// holds it: a rearm deadline (missed-rearm, never-armed, a reading awaiting
// its rearm) waits only for calls that set PATH_MIG_STATE to REARM or
// ARMED; the judgements of an alternate load (a bare rearm, an episode's
// linger) only for calls that load one. Its record then decides, as if it
// had come on time; one that never comes leaves the deadline judged, with
// the call named in the evidence.
//
// A reading is a call's result too (shownByReading): one whose dump began
// after the call's entry and shows what the call sets (REARM or ARMED after
// a rearm, ARMED after a modify to ARMED), while no rearm the model applied
// since the last migration explains it, ends the call as if its record had
// come, successful, at its entry stamp, whatever became of that record
// (lost to a full ring buffer, counted or not, or to a kretprobe that ran
// out of instances). The paths it loaded are not in the entry record: an
// alternate it loaded is taken as unknown, never judged.

// call is one modify in progress on a QP: the thread that made it, its
// entry stamp and sequence number, and what it sets.
type call struct {
	tid  uint32
	at   uint64
	seq  uint64
	mask uint32         // event.Attr* of the call
	mig  event.MigState // PATH_MIG_STATE it sets, when mask has it
}

// What a call in progress may hold.
const (
	holdArm  = iota // a deadline a rearm (or a modify to ARMED) meets
	holdLoad        // a judgement an alternate load changes
)

// can reports whether the call could meet a deadline of the given class.
func (c call) can(what int) bool {
	if what == holdLoad {
		return c.mask&event.AttrAltPath != 0
	}
	return c.arms()
}

// arms reports whether the call sets PATH_MIG_STATE to REARM or ARMED.
func (c call) arms() bool {
	return c.mask&event.AttrPathMigState != 0 && (c.mig == event.MigRearm || c.mig == event.MigArmed)
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
	x.calls = append(x.calls, call{tid: ev.TID, at: ev.Boot, seq: ev.Seq, mask: ev.Modify.AttrMask, mig: ev.Modify.MigState})
}

// returned ends the calls a modify record completes: the same thread's,
// entered at or before the record's stamp (the same stamp, or the exit's
// when the entry stamp was lost). A deadline that waited for them is
// judged again now.
func (m *Model) returned(slot int32, q *qp, ev *event.Event) {
	if m.endCalls(q, func(c call) bool { return c.tid == ev.TID && c.at <= ev.Boot }) {
		m.wake(slot, q, ev.Boot)
	}
}

// endCalls forgets the calls done reports ended; it reports whether any did.
func (m *Model) endCalls(q *qp, done func(call) bool) bool {
	x := q.x
	if x == nil || len(x.calls) == 0 {
		return false
	}
	kept := x.calls[:0]
	for _, c := range x.calls {
		if !done(c) {
			kept = append(kept, c)
		}
	}
	if len(kept) == len(x.calls) {
		return false
	}
	clear(x.calls[len(kept):])
	x.calls = kept
	if len(kept) == 0 {
		x.calls = nil
	}
	return true
}

// shownByReading applies, before the reading ev (its dump began at start)
// changes anything, the calls in progress whose result it shows.
func (m *Model) shownByReading(slot int32, q *qp, ev *event.Event, start uint64) {
	t := ev.Truth
	x := q.x
	if x == nil || len(x.calls) == 0 || !t.HasState || t.State == event.StateErr || t.State == event.StateReset ||
		t.Mig == event.MigMigrated {
		return
	}
	l := q.lastMig()
	if q.rearm.ok() && (l == nil || q.rearm.boot >= l.at.boot) {
		return // a rearm the model applied explains the reading
	}
	var shown []call
	m.endCalls(q, func(c call) bool {
		ok := c.arms() && c.at <= start && (l == nil || c.at >= l.at.boot) && (c.mig == event.MigRearm || t.Mig == event.MigArmed)
		if ok {
			shown = append(shown, c)
		}
		return ok
	})
	for _, c := range shown {
		m.callShown(slot, q, c)
	}
	if len(shown) > 0 {
		m.wake(slot, q, ev.Boot)
	}
}

// callShown applies a call a reading showed done: a successful modify at
// its entry stamp. An alternate it loaded is unknown: the QP's alternate is
// taken as unknown, and the episode's rearm is not judged on it
// (rearm-without-new-alternate claims no more than was seen).
func (m *Model) callShown(slot int32, q *qp, c call) {
	ev := &event.Event{Kind: event.KindModify, Seq: c.seq, Boot: c.at, TID: c.tid,
		Modify: &event.Modify{QPType: q.qpType, AttrMask: c.mask &^ event.AttrAltPath, MigState: c.mig}}
	if c.mask&event.AttrAltPath != 0 {
		q.alt, q.altLoad = route{}, refOf(ev)
		if ep := q.episode(); ep != nil && c.at >= ep.mig.boot && !ep.rearm.ok() {
			ep.altLoad = refOf(ev)
			ep.done |= dNoAlt
		}
	}
	if c.mig == event.MigArmed {
		m.armedByModify(slot, q, ev)
	} else {
		m.rearmed(slot, q, ev)
	}
}

// callHold returns, for a deadline dl of the class what (holdArm,
// holdLoad) judged at at, the time to judge it instead while a call that
// could meet it and entered before dl is still in progress: its entry plus
// Config.CallWait. 0: nothing holds it.
func (m *Model) callHold(q *qp, dl, at uint64, what int) uint64 {
	x := q.x
	if x == nil {
		return 0
	}
	var hold uint64
	for _, c := range x.calls {
		if c.at <= dl && c.can(what) {
			if until := c.at + uint64(m.cfg.CallWait); until > at {
				hold = max(hold, until)
			}
		}
	}
	return hold
}

// unreturned is the oldest call in progress of the class what that entered
// at or before dl, for the evidence of a deadline judged without it.
func (q *qp) unreturned(dl uint64, what int) (call, bool) {
	if q.x == nil {
		return call{}, false
	}
	for _, c := range q.x.calls {
		if c.at <= dl && c.can(what) {
			return c, true
		}
	}
	return call{}, false
}
