package audit

import (
	"github.com/apmwatch/apmwatch/event"
)

// reconciler finds the QPs rdma netlink lists that the probes never saw,
// from the stream itself: the ground-truth readings (event.KindTruth, merged
// in by rdmanl.Merge) and the probes' events. The model takes the
// same readings through Handle. Its memory follows the live QPs: a QP leaves
// every set when it is destroyed or reported gone.
type reconciler struct {
	seen     map[event.QPKey]bool // QPs the probes saw
	unseen   map[event.QPKey]bool // read but unseen at the last reading
	reported map[event.QPKey]bool // unseen at two readings in a row: reported once
}

func newReconciler() *reconciler {
	return &reconciler{seen: map[event.QPKey]bool{}, unseen: map[event.QPKey]bool{}, reported: map[event.QPKey]bool{}}
}

// observe notes the QP an event is about. It returns the reading when it is
// the second in a row of a QP the probes never saw (once per QP): a QP
// made just before a reading may still be on its way from the probes.
func (r *reconciler) observe(e *event.Event) (unseen *event.Event) {
	if e.QPN == 0 || e.Device == "" {
		return nil
	}
	k := e.Key()
	switch {
	case e.Kind == event.KindTruth && e.Truth != nil && e.Truth.Op == event.TruthGone:
		r.forget(k)
	case e.Kind == event.KindTruth && e.Truth != nil && e.Truth.Op == event.TruthRead:
		if r.seen[k] {
			return nil
		}
		if r.unseen[k] && !r.reported[k] {
			r.reported[k] = true
			unseen = e
		}
		r.unseen[k] = true
	case e.Kind == event.KindTruth:
	case e.Kind == event.KindQPDestroy && (e.Life == nil || e.Life.Ret == 0):
		r.forget(k)
	default:
		r.seen[k] = true
		delete(r.unseen, k)
	}
	return unseen
}

func (r *reconciler) forget(k event.QPKey) {
	delete(r.seen, k)
	delete(r.unseen, k)
	delete(r.reported, k)
}
