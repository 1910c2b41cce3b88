package fleet

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A share is the partitions p with p % N == s (N: --instances). An
// instance judges each share it holds with an engine of its own, rebuilt
// from the stream when it starts to hold it, dropped when it stops.

// sharePartitions returns share s's partitions, of n shares.
func sharePartitions(s, n int) []int {
	var ps []int
	for p := range wire.Partitions {
		if p%n == s {
			ps = append(ps, p)
		}
	}
	return ps
}

// shareRun judges one share.
type shareRun struct {
	in    *instance
	share int
	parts []int
	// others marks the partitions not in the share when it reads the
	// whole connection namespace (wholeStream): their records are
	// skipped before they are decoded
	others *[wire.Partitions]bool
	engine *Engine
	ctx    context.Context // run's: the engine's findings wait for the fence until it is done
	// onReady is called once the rebuild is consumed, with the ends
	// rebuilt
	onReady func(ends int)
}

// newShareRun makes share s's engine; it gives the host-silent findings
// of the hosts whose name hashes to one of its partitions.
func (in *instance) newShareRun(s int, onReady func(int)) *shareRun {
	n := in.cfg.Instances
	ec := in.cfg.Engine
	ec.OwnsHost = func(host string) bool { return HostPartition(host)%n == s }
	r := &shareRun{in: in, share: s, parts: sharePartitions(s, n), onReady: onReady, ctx: context.Background()}
	r.engine = NewEngine(ec, func(l Line) { in.fence.emit(r.ctx, l) })
	return r
}

// run rebuilds the share's state and judges it until ctx is done.
func (r *shareRun) run(ctx context.Context) error {
	r.ctx = ctx
	if err := r.loadJudged(ctx); err != nil {
		return err
	}
	return r.consume(ctx)
}

// home reports whether this is the instance's own share (its engine
// gives the gauges).
func (r *shareRun) home() bool { return r.share == r.in.cfg.Instance }

// loadJudged reads this instance's partitions' findings from the stream:
// what an earlier run (or a former owner) judged is not judged again.
func (r *shareRun) loadJudged(ctx context.Context) error {
	if ctx.Err() != nil {
		return nil
	}
	in := r.in
	var filters []string
	for _, p := range r.parts {
		filters = append(filters, wire.FleetFindingSubject(p))
	}
	streams, err := natsconn.StreamsOf(ctx, in.js, filters)
	if err != nil {
		return err
	}
	n := 0
	for name, fs := range streams {
		k, err := natsconn.ReadAll(ctx, in.js, name, jetstream.OrderedConsumerConfig{FilterSubjects: fs}, func(m jetstream.Msg) {
			r.engine.Seen(m.Data())
		})
		if err != nil {
			return fmt.Errorf("reading earlier findings: %w", err)
		}
		n += k
	}
	in.log.Info("earlier findings read", "share", r.share, "findings", n)
	return nil
}

// consume rebuilds the partitions' state from the last record of every
// end, then follows new records, judging as it goes.
func (r *shareRun) consume(ctx context.Context) error {
	if ctx.Err() != nil {
		return nil
	}
	in := r.in
	var filters []string
	for _, p := range r.parts {
		filters = append(filters, wire.ConnFilter(p))
	}
	streams, err := natsconn.StreamsOf(ctx, in.js, filters)
	if err != nil {
		return err
	}
	r.followHeartbeats(ctx, streams)
	if r.wholeStream(streams) {
		r.others = new([wire.Partitions]bool)
		for p := range wire.Partitions {
			r.others[p] = true
		}
		for _, p := range r.parts {
			r.others[p] = false
		}
	}
	msgs := make(chan jetstream.Msg, 4096)
	var initial uint64
	var cons []jetstream.Consumer
	clock := newStreamClock()
	for name, fs := range streams {
		c, err := in.js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{FilterSubjects: fs,
			DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
		if err != nil {
			return fmt.Errorf("consuming %s: %w", name, err)
		}
		cons = append(cons, c)
		initial += c.CachedInfo().NumPending
		clock.pending[name] = c.CachedInfo().NumPending
		cc, err := c.Consume(func(m jetstream.Msg) {
			select {
			case msgs <- m:
			case <-ctx.Done():
			}
		})
		if err != nil {
			return fmt.Errorf("consuming %s: %w", name, err)
		}
		defer cc.Stop()
	}
	answered := probeConsumers(ctx, cons)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var applied uint64
	ready := false
	// merge orders the live messages of several streams (merge.go); the
	// rebuild's last records need no order across them
	var merge *streamMerge
	markReady := func() {
		ready = true
		r.engine.CloseUnpaired() // the rebuild is read: what was open on connections gone since is over
		r.engine.Live()
		if len(streams) > 1 {
			merge = newStreamMerge(clock.pending)
		}
		in.log.Info("fleet consuming", "nats", in.url, "instance", in.cfg.Instance, "instances", in.cfg.Instances,
			"share", r.share, "rebuilt_ends", r.engine.ends.n)
		if r.onReady != nil {
			r.onReady(r.engine.ends.n)
		}
	}
	if initial == 0 {
		markReady()
	}
	handle := func(m jetstream.Msg, md *jetstream.MsgMetadata, now time.Time) {
		applied++
		var stored time.Time
		if md != nil {
			stored = md.Timestamp
			clock.consumed(md.Stream, stored, md.NumPending, now)
		}
		r.take(m, stored, now)
		if md != nil {
			in.m.lagMessages.Set(float64(md.NumPending))
			if !ready && (len(streams) == 1 && md.NumPending == 0 || applied >= initial) {
				markReady()
			}
		}
	}
	var outOfOrder uint64
	drain := func(now time.Time) {
		for {
			it, ok := merge.pop(now)
			if !ok {
				break
			}
			handle(it.m, it.md, now)
		}
		if merge.OutOfOrder > outOfOrder {
			in.log.Warn("a stream lagged past what the instance holds: messages of the others went on before its", "share", r.share,
				"messages", merge.OutOfOrder-outOfOrder)
			outOfOrder = merge.OutOfOrder
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil // the fence settles the findings handed to it
		case m := <-msgs:
			if in.cfg.hold != nil {
				in.cfg.hold()
			}
			now := time.Now()
			md, mdErr := m.Metadata()
			if mdErr != nil {
				md = nil
			}
			if merge != nil && md != nil {
				merge.push(md.Stream, merged{m: m, md: md, stored: md.Timestamp, pending: md.NumPending}, now)
				drain(now)
				continue
			}
			handle(m, md, now)
		case now := <-tick.C:
			if in.cfg.hold != nil {
				in.cfg.hold()
				now = time.Now()
			}
			held := 0
			if merge != nil {
				drain(now)
				held = merge.held
			}
			current := in.js.Conn().IsConnected() && len(msgs) == 0 && held == 0 && now.Sub(time.Unix(0, answered.Load())) < probeFresh
			if at := clock.at(now, current); !at.IsZero() {
				r.engine.Advance(at)
			}
			in.m.updateShare(r.share, r.engine, r.home())
		}
	}
}

// wholeStream reads the one stream of the share's partitions and the
// heartbeats through one filter, the whole connection namespace, and
// says so: the server delivers from a consumer of many filter subjects
// at a cost that grows with the subjects a block of the stream holds (it
// intersects them with the filters for every message; at 100,000
// connections a storm took four instances of 17 filters 12 times as long
// as one instance of one filter), from one of a single filter at a cost
// that does not. The records of other partitions are then skipped (take).
// A subject there that is neither a record's nor a heartbeat's is refused
// as any malformed subject is.
func (r *shareRun) wholeStream(streams map[string][]string) bool {
	if len(streams) != 1 {
		return false
	}
	for name, fs := range streams {
		if fs[len(fs)-1] != wire.HeartbeatFilter {
			return false // heartbeats not followed: in another stream
		}
		streams[name] = []string{wire.ConnPrefix + ">"}
	}
	return true
}

// followHeartbeats adds the hosts' heartbeats to what the instance
// consumes: to the consumer of their stream when it holds records of the
// instance's (so that it reads a host's heartbeats and records in the
// order they were stored), else through a consumer of their own, merged
// with the records by stored time (merge.go). Where no stream holds them
// it says it does not follow them: no host is judged silent, and pairs
// are judged on the stream's clock alone.
func (r *shareRun) followHeartbeats(ctx context.Context, streams map[string][]string) {
	in := r.in
	hs, err := natsconn.StreamsOf(ctx, in.js, []string{wire.HeartbeatFilter})
	if err == nil {
		for name := range hs {
			streams[name] = append(streams[name], wire.HeartbeatFilter)
			return
		}
	}
	in.log.Warn("hosts' heartbeats not followed: no stream holds them", "subject", wire.HeartbeatFilter, "err", err)
}

// take applies one message: a heartbeat, or a record bound to its
// subject (trust.go: a host speaks only for its own ends).
func (r *shareRun) take(m jetstream.Msg, stored, now time.Time) {
	in := r.in
	rc := Received{Subject: m.Subject(), Stored: stored, Data: m.Data(), Behind: behind(m.Headers())}
	if wire.IsHeartbeat(rc.Subject) {
		r.engine.TakeHeartbeat(rc, now)
		return
	}
	if r.others != nil {
		if p, ok := wire.SubjectPartition(rc.Subject); ok && r.others[p] {
			return // another share's
		}
	}
	_, why := r.engine.Take(rc, now)
	switch why {
	case "":
		in.m.records.Inc()
		if !stored.IsZero() {
			in.m.lagSeconds.Set(max(0, now.Sub(stored).Seconds()))
		}
	case refusedUndecodable.String():
		in.m.badRecords.Inc()
	}
}

// The consumers are asked for their info every probeEvery; the stream's
// clock runs on the instance's own only while all answered within
// probeFresh (streamClock).
const (
	probeEvery = 500 * time.Millisecond
	probeFresh = 2 * time.Second
)

// probeConsumers returns when all of cons last answered (Unix ns), asked
// every probeEvery until ctx is done: an answer says the stream has a
// leader and the consumer lives on it. A consumer lost with its node
// answers no more until the ordered consumer makes itself again (after
// two missed heartbeats); a stream electing a leader answers nothing.
func probeConsumers(ctx context.Context, cons []jetstream.Consumer) *atomic.Int64 {
	var answered atomic.Int64
	answered.Store(time.Now().UnixNano()) // each was just made: it answered
	go func() {
		t := time.NewTicker(probeEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			ok := true
			for _, c := range cons {
				c2, cancel := context.WithTimeout(ctx, probeFresh/2)
				_, err := c.Info(c2)
				cancel()
				ok = ok && err == nil
			}
			if ok {
				answered.Store(time.Now().UnixNano())
			}
		}
	}()
	return &answered
}

// behind reads a record's BehindHeader: 0 when absent (a publisher that
// does not say) or not a count.
func behind(h nats.Header) int {
	n, err := strconv.Atoi(h.Get(wire.BehindHeader))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
