package audit

import (
	"time"

	"context"
	"errors"
	"io"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// item is one event from a source, a watermark (mark > 0), or the end of
// that source (neither).
type item struct {
	ev    *event.Event
	mark  uint64
	epoch int   // which attach the event came from
	err   error // why the source ended, when not closed by us
}

// feed reads one source into ch until it ends. The source ends when the
// daemon closes it (after draining what the probes delivered) or on a read
// error; either way the last item has ev nil.
func feed(src event.Source, epoch int, ch chan<- item) {
	for {
		e, mark, err := event.NextOrMark(context.Background(), src)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			ch <- item{epoch: epoch, err: err}
			return
		}
		ch <- item{ev: e, mark: mark, epoch: epoch}
	}
}

// attach opens the probes and starts reading them, with rdma netlink's
// readings merged into their stream every Config.ReconcileInterval: the
// model, the flight recorder and the bundles take them like any event.
func (d *daemon) attach(reason string) error {
	before := moduleIDs(d.deps.ModulesRoot)
	src, err := d.deps.Open()
	if err != nil {
		d.m.sourceUp.Set(0)
		return err
	}
	src = rdmanl.Merge(d.scope(src), rdmanl.MergeOptions{Every: d.cfg.ReconcileInterval, Read: d.deps.Snapshot,
		OnRead: d.onReading, Warn: func(err error) { d.log.Warn("rdma netlink reading failed", "err", err) }})
	d.epoch++
	d.src, d.counts, d.marked = src, counted{}, false
	d.wake.wanted = 0 // ask the new source afresh
	meta := src.Meta()
	d.meta = meta
	d.m.setHooks(meta.Hooks)
	d.seeing(meta.Hooks)
	d.mods = newModWatch(d.deps.ModulesRoot, meta.Hooks, before)
	go feed(src, d.epoch, d.events)
	attached := map[event.HookMethod]int{}
	for _, h := range meta.Hooks {
		attached[h.Method]++
	}
	d.log.Info("probes attached", "reason", reason, "fentry", attached[event.HookFentry], "kprobe", attached[event.HookKprobe],
		"tracepoint", attached[event.HookTracepoint], "missing", attached[event.HookMissing], "kernel", meta.Kernel)
	if reason != "start" {
		d.m.sourceRestarts.WithLabelValues(reason).Inc()
		if lt, ok := d.cfg.Actor.(LossTaker); ok {
			lt.Lost(d.deps.Boot()) // nothing was seen while the probes were off
		}
	}
	if d.rec != nil {
		d.rec.start(meta, d.now())
	}
	return nil
}

// onReading sees every rdma netlink reading as it is taken: the metrics
// of the table, and a ReadingSink.
func (d *daemon) onReading(s rdmanl.Snapshot, err error) {
	d.m.reading(s, err)
	if rs, ok := d.cfg.Sink.(ReadingSink); ok && err == nil {
		rs.Reading(s)
	}
}

// detach closes the probes; the events they delivered still arrive (the
// reader sends them, then the end item).
func (d *daemon) detach() {
	if d.src == nil {
		return
	}
	d.src.Close()
	d.lastStats = d.src.Stats()
	d.lossTo(d.lastStats)
	d.m.addStats(&d.counts, d.lastStats)
	if d.rec != nil {
		d.rec.writeStats(d.lastStats, d.now())
	}
	d.src = nil
	d.m.sourceUp.Set(0)
}

// blindRetry is how often a blind source (event.Blind) is re-attached: a
// full attach costs seconds of CPU, and what failed (missing BTF, a module
// the probes do not fit) rarely mends itself sooner.
const blindRetry = 30 * time.Second

// seeing judges the attached hooks: a source blind to an APM signal stays
// attached for what it does see, but the probes are not up
// (apmwatch_probes_up 0, the alert's condition), the error is logged once
// per change, and the daemon re-attaches every blindRetry.
func (d *daemon) seeing(hooks []event.Hook) {
	err := event.BlindError(hooks)
	if err == nil {
		if d.blind != "" {
			d.log.Info("probes see every APM signal again")
		}
		d.blind = ""
		d.m.sourceUp.Set(1)
		return
	}
	if err.Error() != d.blind {
		d.log.Error("probes attached blind: findings cannot be judged; retrying", "err", err, "retry_in", blindRetry)
	}
	d.blind, d.blindAt = err.Error(), d.now()
	d.m.sourceUp.Set(0)
}

// reattach re-plans and re-attaches the probes (modules changed, or the
// source failed). When it fails the daemon retries at every module check.
func (d *daemon) reattach(reason, why string) {
	d.log.Warn("re-attaching the probes", "reason", reason, "why", why)
	d.detach()
	if err := d.attach(reason); err != nil {
		if !d.attachFailed {
			d.log.Error("cannot attach the probes: retrying", "err", err)
		}
		d.attachFailed = true
		return
	}
	d.attachFailed = false
}
