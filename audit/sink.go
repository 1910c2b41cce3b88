package audit

import (
	"context"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// Sink takes a copy of what the daemon sees and writes, for example a
// publisher to NATS (package fleet). Its methods run on the loop
// goroutine and must not block: a sink hands work to its own goroutines.
// A sink that is also a prometheus.Collector joins the daemon's metrics.
type Sink interface {
	Observe(ev *event.Event) // every event (after --device), in delivery order; must not keep ev
	Line(l findingline.Line) // every finding and resolution line
	Tick(now time.Time)      // about once a second
}

// ReadingSink is a Sink that also takes every rdma netlink reading, as
// taken (within --device): for example a publisher that must know which
// of the QPs an earlier run published still exist. Reading runs on the
// goroutine that reads the probes, before the reading's events reach the
// loop; it must not block nor keep the snapshot's slices.
type ReadingSink interface {
	Sink
	Reading(s rdmanl.Snapshot)
}

// scopedSource restricts a source to one device (Config.Device) and names
// the host it reports as (Config.Host). Events of other devices, and
// events that do not say their device (a driver's copy of a QP event),
// are dropped: with one daemon per device they belong to no one for sure.
type scopedSource struct {
	event.Source
	device, host string
}

func (d *daemon) scope(src event.Source) event.Source {
	if d.cfg.Device == "" && d.cfg.Host == "" {
		return src
	}
	return &scopedSource{Source: src, device: d.cfg.Device, host: d.cfg.Host}
}

func (s *scopedSource) Meta() event.Meta {
	m := s.Source.Meta()
	if s.host != "" {
		m.Host = s.host
	}
	return m
}

func (s *scopedSource) Next(ctx context.Context) (*event.Event, error) {
	for {
		e, err := s.Source.Next(ctx)
		if err != nil || s.device == "" || e.Device == s.device {
			return e, err
		}
	}
}

// NextMark is Next with the source's watermarks passed through.
func (s *scopedSource) NextMark(ctx context.Context) (*event.Event, uint64, error) {
	for {
		e, mark, err := event.NextOrMark(ctx, s.Source)
		if err != nil || e == nil || s.device == "" || e.Device == s.device {
			return e, mark, err
		}
	}
}

// WantMark passes the request on.
func (s *scopedSource) WantMark(at uint64) {
	if m, ok := s.Source.(event.Marker); ok {
		m.WantMark(at)
	}
}

// scopeSnapshot restricts rdma netlink readings to Config.Device.
func scopeSnapshot(device string, read func() (rdmanl.Snapshot, error)) func() (rdmanl.Snapshot, error) {
	return func() (rdmanl.Snapshot, error) {
		s, err := read()
		if err != nil || device == "" {
			return s, err
		}
		qps := s.QPs[:0:0]
		for _, q := range s.QPs {
			if q.Device == device {
				qps = append(qps, q)
			}
		}
		ids := s.CMIDs[:0:0]
		for _, c := range s.CMIDs {
			if c.Device == device {
				ids = append(ids, c)
			}
		}
		s.QPs, s.CMIDs = qps, ids
		return s, nil
	}
}
