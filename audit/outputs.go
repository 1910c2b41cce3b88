package audit

import (
	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
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
	line := Line{Type: TypeFinding, Logged: d.now().UTC(), Host: d.meta.Host, Finding: f}
	if f.Resolved {
		line.Type = TypeResolution
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
		d.flog.write(line)
		return
	}
	d.m.findings.WithLabelValues(string(f.Kind), f.Severity.String()).Inc()
	d.open[f.ID] = open{kind: f.Kind, key: event.QPKey{Device: f.QP.Device, QPN: f.QP.QPN}}
	d.m.openFindings.WithLabelValues(string(f.Kind)).Inc()
	if d.rec != nil {
		line.Bundle = d.addToBundle(line)
	}
	d.flog.write(line)
	if fromModel && d.cfg.Actor != nil {
		for _, a := range d.cfg.Actor.Act(d.ctx, f) {
			d.finding(d.actorID(a), false)
		}
	}
}

func (d *daemon) actorID(f apm.Finding) apm.Finding {
	if f.ID == 0 {
		d.actorIDs++
		f.ID = actorIDBase + d.actorIDs
	}
	return f
}

// closeOpen closes the open findings of a QP that is gone.
func (d *daemon) closeOpen(k event.QPKey) {
	for id, o := range d.open {
		if o.key == k {
			delete(d.open, id)
			d.m.openFindings.WithLabelValues(string(o.kind)).Dec()
		}
	}
}
