package audit

import (
	"context"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline"
)

// addToBundle puts a new finding into the bundle being gathered (starting
// one when none is), with the netlink rows of its QP as they are now, and
// returns the bundle's directory.
func (d *daemon) addToBundle(line findingline.Line) string {
	if d.pending == nil {
		var from uint64
		if b := uint64(d.cfg.BundleBefore); line.First > b {
			from = line.First - b
		}
		d.pending = newBundle(d.cfg.RecorderDir, d.now(), line, d.cfg.BundleAfter, from)
	} else if line.First > 0 && line.First-min(line.First, uint64(d.cfg.BundleBefore)) < d.pending.from {
		d.pending.from = line.First - min(line.First, uint64(d.cfg.BundleBefore))
	}
	line.Bundle = d.pending.dir
	d.pending.lines = append(d.pending.lines, line)
	key := event.QPKey{Device: line.QP.Device, QPN: line.QP.QPN}
	if !d.pending.keys[key] {
		snap, err := d.pending.snapshot(d.now(), d.deps.Snapshot)
		d.pending.addQPs(key, snap, err)
	}
	return d.pending.dir
}

// dispatchBundle hands the gathered bundle to the writer, with the flight
// recorder flushed so that its files hold every event so far.
func (d *daemon) dispatchBundle() {
	b := d.pending
	d.pending = nil
	d.rec.flush(d.now())
	b.files, b.host = d.rec.paths(), d.meta.Host
	select {
	case d.bundles <- b:
	default:
		d.m.bundles.WithLabelValues("error").Inc()
		d.log.Warn("incident bundle dropped: the writer is behind", "bundle", b.dir)
	}
}

// writeBundles is the bundle writer goroutine.
func (d *daemon) writeBundles() {
	defer close(d.bundleWG)
	for b := range d.bundles {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err := writeBundle(ctx, b)
		cancel()
		if err != nil {
			d.m.bundles.WithLabelValues("error").Inc()
			d.log.Warn("incident bundle failed", "bundle", b.dir, "err", err)
			continue
		}
		d.m.bundles.WithLabelValues("written").Inc()
		d.log.Info("incident bundle written", "bundle", b.dir, "findings", len(b.lines))
		pruneBundles(d.cfg.RecorderDir, d.cfg.MaxBundles)
	}
}
