package rdmanl

import (
	"github.com/apmwatch/apmwatch/apm"
)

// Sink is what a Feeder hands readings to; *apm.Model implements it.
type Sink interface {
	Truth(apm.Truth)
	MarkCM(device string, qpn uint32, at uint64)
	Gone(device string, qpn uint32, at uint64)
}

type qpKey struct {
	dev string
	qpn uint32
}

// Feeder turns successive snapshots into ground truth for the APM model:
// one Truth per QP that has a path-migration state (RC, UC, XRC), a MarkCM
// per cm_id bound to a QP, and a Gone for every such QP of the previous
// snapshot that is missing from this one.
type Feeder struct {
	sink Sink
	prev map[qpKey]struct{}
}

// NewFeeder returns a feeder into sink.
func NewFeeder(sink Sink) *Feeder { return &Feeder{sink: sink, prev: map[qpKey]struct{}{}} }

// Feed hands one snapshot to the sink.
func (f *Feeder) Feed(s Snapshot) {
	cur := make(map[qpKey]struct{}, len(f.prev))
	for _, q := range s.QPs {
		if !q.HasPathMig {
			continue
		}
		cur[qpKey{q.Device, q.LQPN}] = struct{}{}
		f.sink.Truth(apm.Truth{Device: q.Device, QPN: q.LQPN, Mig: q.PathMig, State: q.State, HasState: true,
			At: s.Boot, Source: "netlink"})
	}
	for _, c := range s.CMIDs {
		if c.LQPN != 0 {
			f.sink.MarkCM(c.Device, c.LQPN, s.Boot)
		}
	}
	for k := range f.prev {
		if _, ok := cur[k]; !ok {
			f.sink.Gone(k.dev, k.qpn, s.Boot)
		}
	}
	f.prev = cur
}
