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
	prev  map[qpKey]struct{}
	saw   map[qpKey]uint64 // QPs the probes saw, with the Boot of the first event
	cmFor map[cmKey]cmBind // each cm_id seen bound, and to which QP generation
}

// cmKey names one rdma_cm id (its restrack id on its device).
type cmKey struct {
	dev string
	id  uint32
}

// cmBind is the QP a cm_id was first seen bound to, and when (the Boot
// its snapshot's dump began); stale once that QP generation ended: it was
// destroyed or gone, or a QP with its QPN was created after the binding
// was seen (rdma_destroy_qp leaves the cm_id's qp_num set, so a later QP
// reusing the QPN would otherwise look CM-driven).
type cmBind struct {
	qpn   uint32
	since uint64
	stale bool
}

// NewFeeder returns a feeder.
func NewFeeder() *Feeder {
	return &Feeder{prev: map[qpKey]struct{}{}, saw: map[qpKey]uint64{}, cmFor: map[cmKey]cmBind{}}
}

// qpEnded marks stale the cm_ids bound to k's generation that ended.
func (f *Feeder) qpEnded(k qpKey) {
	for ck, b := range f.cmFor {
		if ck.dev == k.dev && b.qpn == k.qpn {
			b.stale = true
			f.cmFor[ck] = b
		}
	}
}

// qpCreated marks stale the cm_ids bound to k's QPN seen before a QP with
// that QPN was created at boot: they were bound to an earlier generation.
func (f *Feeder) qpCreated(k qpKey, boot uint64) {
	for ck, b := range f.cmFor {
		if ck.dev == k.dev && b.qpn == k.qpn && b.since < boot {
			b.stale = true
			f.cmFor[ck] = b
		}
	}
}

// cmBound reports which QPs the snapshot s's cm_ids drive: a cm_id marks
// only the QP generation it was first seen with (TestFeederCMIDOutlivesQP),
// and only a QP with an owner of its kind: a kernel ULP's cm_id never
// marks a user process's QP, nor a user's cm_id a kernel QP
// (TestFeederCMIDOtherOwner).
func (f *Feeder) cmBound(s Snapshot) map[qpKey]bool {
	ids := s.CMIDs
	kernel := make(map[qpKey]bool, len(s.QPs)) // each listed QP: a kernel ULP's
	for _, q := range s.QPs {
		kernel[qpKey{q.Device, q.LQPN}] = q.Kernel
	}
	cm := make(map[qpKey]bool, len(ids))
	seen := make(map[cmKey]bool, len(ids))
	for _, c := range ids {
		if c.LQPN == 0 {
			continue
		}
		ck := cmKey{c.Device, c.ID}
		seen[ck] = true
		b, ok := f.cmFor[ck]
		if !ok || b.qpn != c.LQPN {
			b = cmBind{qpn: c.LQPN, since: s.Boot} // new, or bound anew (rdma_create_qp on the id again)
			f.cmFor[ck] = b
		}
		k := qpKey{c.Device, c.LQPN}
		if kern, listed := kernel[k]; b.stale || listed && kern != c.Kernel {
			continue
		}
		cm[k] = true
	}
	for ck := range f.cmFor {
		if !seen[ck] {
			delete(f.cmFor, ck) // the cm_id is gone: bounded by the table
		}
	}
	return cm
}

// Saw notes the QP an event from the probes is about, so that the next
// snapshot that does not list it reports it gone even when no snapshot ever
// listed it. A successful destroy forgets it; a successful create starts a
// new generation of its QPN (a cm_id seen bound to that QPN before is the
// old one's); readings are ignored.
func (f *Feeder) Saw(e *event.Event) {
	if e.QPN == 0 || e.Device == "" || e.Kind == event.KindTruth {
		return
	}
	k := qpKey{e.Device, e.QPN}
	if e.Kind == event.KindQPCreate && e.Life != nil && e.Life.Ret == 0 {
		f.qpCreated(k, e.Boot)
	}
	if e.Kind == event.KindQPDestroy && (e.Life == nil || e.Life.Ret == 0) {
		delete(f.saw, k)
		f.qpEnded(k)
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
	cm := f.cmBound(s)
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
				Span: max(end-s.Boot, 1)}}) // 0 is kept for "unknown" (older recorders)
	}
	reads := len(out)
	gone := func(k qpKey) {
		out = append(out, &event.Event{Kind: event.KindTruth, Boot: end, Device: k.dev, QPN: k.qpn,
			Truth: &event.Truth{Op: event.TruthGone, Source: "netlink"}})
		delete(f.saw, k)
		f.qpEnded(k)
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
