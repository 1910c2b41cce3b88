package audit

import (
	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// reconciler compares rdma netlink readings with what the probes saw. It
// feeds the model the ground truth (apm.Model.Truth), tells it about QPs
// that vanished unseen (apm.Model.Gone), and reports QPs the probes never
// saw. Its memory follows the live QPs: a QP leaves every set when it is
// destroyed or stops being listed.
type reconciler struct {
	tracked  map[event.QPKey]uint64 // QPs the model holds, with the Boot of the first event or reading
	seen     map[event.QPKey]bool   // QPs the probes saw
	unseen   map[event.QPKey]bool   // listed but unseen at the last reading
	reported map[event.QPKey]bool   // unseen at two readings in a row: reported once
}

func newReconciler() *reconciler {
	return &reconciler{tracked: map[event.QPKey]uint64{}, seen: map[event.QPKey]bool{}, unseen: map[event.QPKey]bool{}, reported: map[event.QPKey]bool{}}
}

// observe notes the QP an event is about; it reports a destroyed QP.
func (r *reconciler) observe(e *event.Event) (destroyed bool) {
	if e.QPN == 0 || e.Device == "" {
		return false
	}
	k := e.Key()
	if e.Kind == event.KindQPDestroy && (e.Life == nil || e.Life.Ret == 0) {
		r.forget(k)
		return true
	}
	if !r.seen[k] {
		r.seen[k] = true
		delete(r.unseen, k)
	}
	if _, ok := r.tracked[k]; !ok {
		r.tracked[k] = e.Boot
	}
	return false
}

// reading is what one rdma netlink reading changed.
type reading struct {
	gone   []event.QPKey // seen by the probes, no longer listed
	unseen []rdmanl.QP   // listed at two readings in a row, never seen: new this time
}

// apply feeds one snapshot to the model and returns what changed.
func (r *reconciler) apply(snap rdmanl.Snapshot, m *apm.Model, met *metrics) reading {
	var out reading
	listed := make(map[event.QPKey]bool, len(snap.QPs))
	met.qps.Reset()
	for _, q := range snap.QPs {
		k := event.QPKey{Device: q.Device, QPN: q.LQPN}
		listed[k] = true
		if !q.HasPathMig {
			continue
		}
		met.qps.WithLabelValues(q.Device, q.PathMig.String()).Inc()
		m.Truth(apm.Truth{Device: q.Device, QPN: q.LQPN, Mig: q.PathMig, State: q.State, HasState: true,
			At: snap.Boot, Source: "netlink"})
		if _, ok := r.tracked[k]; !ok {
			r.tracked[k] = snap.Boot
		}
		if r.seen[k] {
			continue
		}
		// A QP made just before the reading may still be on its way from
		// the probes: call it unseen only at the second reading.
		if r.unseen[k] && !r.reported[k] {
			r.reported[k] = true
			out.unseen = append(out.unseen, q)
			met.unseenQPs.Inc()
		}
		r.unseen[k] = true
	}
	for k, first := range r.tracked {
		if !listed[k] && first < snap.Boot {
			m.Gone(k.Device, k.QPN, snap.Boot)
			r.forget(k)
			out.gone = append(out.gone, k)
		}
	}
	for k := range r.unseen {
		if !listed[k] {
			delete(r.unseen, k)
		}
	}
	for k := range r.reported {
		if !listed[k] {
			delete(r.reported, k)
		}
	}
	return out
}

func (r *reconciler) forget(k event.QPKey) {
	delete(r.tracked, k)
	delete(r.seen, k)
	delete(r.unseen, k)
	delete(r.reported, k)
}
