package rdmanl

import (
	"cmp"
	"slices"

	"github.com/apmwatch/apmwatch/event"
)

type qpKey struct {
	dev string
	qpn uint32
}

// Feeder turns successive snapshots into ground-truth events
// (event.KindTruth), the one set of rules for every consumer: a reading
// (TruthRead) per QP that has a path-migration state (RC, UC, XRC), marked
// CM when an rdma_cm id is bound to it, with the owner in the event's PID
// and Comm; and a TruthGone for every such QP of the previous snapshot that
// is missing from this one, and for every QP the probes saw (Saw) before
// the snapshot that it does not list (a destroy the probes did not see).
type Feeder struct {
	prev map[qpKey]struct{}
	saw  map[qpKey]uint64 // QPs the probes saw, with the Boot of the first event
}

// NewFeeder returns a feeder.
func NewFeeder() *Feeder {
	return &Feeder{prev: map[qpKey]struct{}{}, saw: map[qpKey]uint64{}}
}

// Saw notes the QP an event from the probes is about, so that the next
// snapshot that does not list it reports it gone even when no snapshot ever
// listed it. A successful destroy forgets it; readings are ignored.
func (f *Feeder) Saw(e *event.Event) {
	if e.QPN == 0 || e.Device == "" || e.Kind == event.KindTruth {
		return
	}
	k := qpKey{e.Device, e.QPN}
	if e.Kind == event.KindQPDestroy && (e.Life == nil || e.Life.Ret == 0) {
		delete(f.saw, k)
		return
	}
	if _, ok := f.saw[k]; !ok {
		f.saw[k] = e.Boot
	}
}

// Events returns the ground-truth events of one snapshot (Seq 0, Time zero:
// the caller knows the wall clock), and remembers its QPs for the next
// call. A dump reads one QP after another, so every event is stamped with
// the dump's end and a reading says how long the dump ran (event.Truth
// Span): its row stands for some instant in between. A QP missing from the
// table was gone by the end.
func (f *Feeder) Events(s Snapshot) []*event.Event {
	cm := make(map[qpKey]bool, len(s.CMIDs))
	for _, c := range s.CMIDs {
		if c.LQPN != 0 {
			cm[qpKey{c.Device, c.LQPN}] = true
		}
	}
	end := max(s.End, s.Boot)
	var out []*event.Event
	cur := make(map[qpKey]struct{}, len(f.prev))
	listed := make(map[qpKey]bool, len(s.QPs))
	for _, q := range s.QPs {
		k := qpKey{q.Device, q.LQPN}
		listed[k] = true
		if !q.HasPathMig {
			continue
		}
		cur[k] = struct{}{}
		origin := event.OriginUser
		if q.Kernel {
			origin = event.OriginKernel
		}
		out = append(out, &event.Event{Kind: event.KindTruth, Boot: end, PID: q.PID, Comm: q.Comm,
			Device: q.Device, QPN: q.LQPN, Truth: &event.Truth{Op: event.TruthRead, Source: "netlink",
				QPType: q.Type, Origin: origin, State: q.State, HasState: true, Mig: q.PathMig, RQPN: q.RQPN, CM: cm[k],
				Span: end - s.Boot}})
	}
	reads := len(out)
	gone := func(k qpKey) {
		out = append(out, &event.Event{Kind: event.KindTruth, Boot: end, Device: k.dev, QPN: k.qpn,
			Truth: &event.Truth{Op: event.TruthGone, Source: "netlink"}})
		delete(f.saw, k)
	}
	for k := range f.prev {
		if _, ok := cur[k]; !ok {
			gone(k)
		}
	}
	for k, first := range f.saw {
		if _, inPrev := f.prev[k]; !listed[k] && !inPrev && first < s.Boot {
			gone(k)
		}
	}
	slices.SortFunc(out[reads:], func(a, b *event.Event) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), cmp.Compare(a.QPN, b.QPN))
	})
	f.prev = cur
	return out
}
