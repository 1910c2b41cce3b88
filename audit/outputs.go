package audit

import (
	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
)

// publish writes what the model found in the last call.
func (d *daemon) publish() {
	for len(d.found) > 0 {
		f := d.found[0]
		d.found = d.found[1:]
		d.finding(f, true)
	}
	d.found = d.found[:0]
}

// finding writes, counts and bundles one finding or resolution; new model
// findings go to the actor, whose findings are handled the same way.
func (d *daemon) finding(f apm.Finding, fromModel bool) {
	line := findingline.New(f, d.meta.Host)
	line.Logged = d.now().UTC()
	line.BootID = d.meta.BootID
	if f.Resolved {
		d.m.resolutions.WithLabelValues(string(f.Kind)).Inc()
		if f.Kind == apm.MissedRearm && f.Unprotected > 0 {
			d.m.unprotected.Observe(f.Unprotected.Seconds())
		}
		if o, ok := d.open[f.Resolves]; ok {
			delete(d.open, f.Resolves)
			d.m.openFindings.WithLabelValues(string(o.kind)).Dec()
		}
		if d.pending != nil && d.pending.has(f.Resolves) {
			d.pending.lines = append(d.pending.lines, line)
		}
		d.write(line)
		if r, ok := d.cfg.Actor.(Resolver); ok && fromModel {
			r.Resolve(f)
		}
		return
	}
	d.m.findings.WithLabelValues(string(f.Kind), f.Severity.String()).Inc()
	if f.Severity >= apm.SevWarning && d.alive(f.QP) {
		d.open[f.ID] = open{kind: f.Kind, qp: f.QP}
		d.m.openFindings.WithLabelValues(string(f.Kind)).Inc()
	}
	if d.rec != nil {
		line.Bundle = d.addToBundle(line)
	}
	d.write(line)
	if fromModel && d.cfg.Actor != nil {
		for _, a := range d.cfg.Actor.Act(d.ctx, f) {
			d.finding(d.actorID(a), false)
		}
	}
}

// write sends a line to the finding log and the sink.
func (d *daemon) write(line findingline.Line) {
	d.flog.write(line)
	if d.cfg.Sink != nil {
		d.cfg.Sink.Line(line)
	}
}

func (d *daemon) actorID(f apm.Finding) apm.Finding {
	if f.ID == 0 {
		f.ID = d.model.IDs().Next()
	}
	return f
}

// alive reports whether the model still holds the QP history k (the same
// generation): a finding on a history that ended is not open.
func (d *daemon) alive(k apm.Key) bool {
	v, ok := d.model.Lookup(k.Device, k.QPN)
	return ok && v.Key.Gen == k.Gen
}

// sweepOpen closes the open findings whose QP history ended (destroyed, or
// gone from rdma netlink). The model judges in Boot order, after its reorder
// window, so a finding may come after the destroy was delivered: checking
// at every tick catches both orders.
func (d *daemon) sweepOpen() {
	for id, o := range d.open {
		if !d.alive(o.qp) {
			delete(d.open, id)
			d.m.openFindings.WithLabelValues(string(o.kind)).Dec()
		}
	}
}
