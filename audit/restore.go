package audit

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/trusted"
	"github.com/apmwatch/apmwatch/rdmanl"
	"github.com/apmwatch/apmwatch/recording"
)

// Restore: a daemon that starts again on the same boot rebuilds what its
// earlier runs knew, so that a restart (the runbooks recommend one, and
// turning on enforcement needs one) does not forget an open finding: a QP
// that migrated before the start reads RTS MIGRATED exactly like one that
// never armed, and only the earlier run's records tell them apart.
//
//  1. The finding log says which findings were written and which are still
//     open, and the highest ID used: new IDs go on after it.
//  2. The flight recorder's sessions of this boot are replayed into the
//     model, as the live events were (losses included). A replayed finding
//     the log holds takes the logged ID (same kind, QP and first event).
//  3. A logged open missed-rearm whose records the recorder no longer holds
//     is given back to the model (apm.Model.Reopen) when rdma netlink still
//     lists its QP under the same owner.
//  4. The time between the last record and now is unwatched
//     (apm.Model.Unwatched): a loss of unknown size, never evidence. An
//     rdma netlink reading taken now follows it; QPs it does not list, or
//     lists under another owner (a new generation of the QPN), are gone.
//
// What stays open goes back into the open findings (gauge, alerts) and to
// the actor, which sees the rebuilt events as it saw the live ones and may
// act on it under its policy. TestRestart* say it.

// reopenClockGrace is how far before this boot's start (by the wall
// clock) a logged finding may seem to begin and still be taken as of this
// boot: a clock stepped back after the boot.
const reopenClockGrace = 5 * time.Second

// restoreResult is what a restore rebuilt, for the log and the actor.
type restoreResult struct {
	sessions, events int
	reopened         []apm.Finding // open again, under their logged IDs
	unlogged         int           // judged in the replay, never written: written now
	lost             int           // logged open, not rebuilt
	gapFrom          uint64        // the last Boot the earlier runs watched
}

// restore rebuilds the model before the probes start (see above). It
// fails only on a context cancelled; anything it cannot read is skipped
// with a warning.
func (d *daemon) restore(ctx context.Context) restoreResult {
	var res restoreResult
	bootID := d.deps.BootID()
	logged := readLogged(d.cfg.Findings, d.log.Warn)
	d.model.IDs().AtLeast(logged.maxID)
	var replayed []apm.Finding
	if d.rec != nil && bootID != "" {
		replayed, res = d.replayFlight(ctx, bootID)
	}
	open := openOf(replayed)
	for _, f := range replayed {
		if id, ok := logged.byKey[keyOf(f)]; ok && id != f.ID {
			d.model.Renumber(f.ID, id)
			if o, isOpen := open[f.ID]; isOpen {
				delete(open, f.ID)
				o.ID = id
				open[id] = o
			}
		}
	}
	now := d.deps.Boot()
	snap, snapErr := d.deps.Snapshot()
	if snapErr != nil {
		d.log.Warn("restore: rdma netlink not read; what the earlier runs left open is judged on the probes alone", "err", snapErr)
	}
	rows := map[qpRow]rdmanl.QP{}
	for _, q := range snap.QPs {
		rows[qpRow{q.Device, q.LQPN}] = q
	}
	// a finding of another boot is about a QP that died with it; a line
	// without boot_id is of this boot if first seen after it began (a few
	// seconds' grace for a clock step)
	bootStart := d.deps.Now().Add(-time.Duration(now) - reopenClockGrace)
	reopenedFrom := uint64(0)
	for id, f := range logged.open {
		if _, rebuilt := open[id]; rebuilt || logged.resolved[id] {
			continue
		}
		row, listed := rows[qpRow{f.QP.Device, f.QP.QPN}]
		ofBoot := bootID != "" && (logged.boot[id] == bootID ||
			logged.boot[id] == "" && !f.FirstTime.IsZero() && !f.FirstTime.Before(bootStart)) // a line older than boot_id
		if snapErr == nil && listed && row.PID == f.PID && ofBoot {
			if k, ok := d.model.Reopen(f); ok {
				f.QP = k
				open[id] = f
				if reopenedFrom == 0 || f.Last < reopenedFrom {
					reopenedFrom = f.Last
				}
				continue
			}
		}
		res.lost++
	}
	if res.gapFrom == 0 && reopenedFrom != 0 {
		// what came after a finding the recorder no longer holds the
		// records of was not watched by this model
		res.gapFrom = reopenedFrom
	}
	for id, f := range open {
		if logged.resolved[id] {
			delete(open, id) // the log closed it (an actor's fix, an end the replay did not see)
			continue
		}
		if _, ok := logged.open[id]; !ok && d.cfg.Findings != "" {
			res.unlogged++
			d.found = append(d.found, f) // judged on recorded evidence, never written: written now
			delete(open, id)
		}
	}
	if res.gapFrom != 0 {
		d.model.Unwatched(res.gapFrom, max(now, res.gapFrom))
	}
	gone := map[qpRow]bool{}
	if snapErr == nil {
		gone = d.applyReading(snap, max(now, snap.End, snap.Boot))
	}
	for _, f := range open {
		if d.alive(f.QP) && !gone[qpRow{f.QP.Device, f.QP.QPN}] {
			res.reopened = append(res.reopened, f)
		}
	}
	return res
}

// qpRow names a QP of an rdma netlink reading.
type qpRow struct {
	dev string
	qpn uint32
}

// applyReading gives the model the reading taken at start: a QP it holds
// that the reading does not list, or lists under another owner, is gone
// (its QPN was given to a new QP while nobody watched); then the rows. It
// returns the QPs found gone.
func (d *daemon) applyReading(s rdmanl.Snapshot, at uint64) map[qpRow]bool {
	rows := map[qpRow]uint32{}
	for _, q := range s.QPs {
		rows[qpRow{q.Device, q.LQPN}] = q.PID
	}
	var ends []*event.Event
	gone := map[qpRow]bool{}
	d.model.EachQP(func(v apm.QPView) {
		k := qpRow{v.Key.Device, v.Key.QPN}
		pid, listed := rows[k]
		if !listed || (v.PID != 0 && pid != 0 && pid != v.PID) {
			gone[k] = true
			ends = append(ends, &event.Event{Kind: event.KindTruth, Boot: at, Device: v.Key.Device, QPN: v.Key.QPN,
				Truth: &event.Truth{Op: event.TruthGone, Source: "netlink"}})
		}
	})
	for _, e := range ends {
		d.observe(e)
	}
	s.End = max(s.End, at)
	for _, e := range rdmanl.NewFeeder().Events(s) {
		d.observe(e)
	}
	return gone
}

// observe gives a rebuilt event to the model and to the actor, which
// learns QPs, owners and handles from them as from live events.
func (d *daemon) observe(e *event.Event) {
	if d.cfg.Actor != nil {
		d.cfg.Actor.Observe(e)
	}
	d.model.Handle(e)
}

// replayFlight replays the recorder's files of this boot into the model
// and returns the findings it judged.
func (d *daemon) replayFlight(ctx context.Context, bootID string) ([]apm.Finding, restoreResult) {
	var res restoreResult
	files := d.rec.files()
	if len(files) == 0 {
		return nil, res
	}
	// what is replayed decides what the actor may act on: only a
	// directory and files nobody else may write
	if err := trusted.Dir(d.rec.dir, true); err != nil {
		d.log.Warn("restore: flight recorder not replayed", "err", err)
		return nil, res
	}
	var paths []string
	for _, f := range files {
		fh, _, err := trusted.Open(f.path)
		if err != nil {
			d.log.Warn("restore: flight recorder file not replayed", "err", err)
			continue
		}
		fh.Close()
		paths = append(paths, f.path)
	}
	if len(paths) == 0 {
		return nil, res
	}
	r, err := recording.OpenWith(recording.ReadOptions{
		OnLoss: func(l recording.Loss) { d.model.Lost(l.From, l.To, l.Lost, l.Damaged) },
	}, paths...)
	if err != nil {
		d.log.Warn("restore: the flight recorder is not readable; nothing rebuilt", "err", err)
		return nil, res
	}
	defer r.Close()
	meta := r.Meta()
	if meta.BootID != bootID {
		return nil, res // an earlier boot's: its QPs died with it
	}
	sessions := map[uint64]bool{}
	for _, h := range r.Headers() {
		if h.Meta.BootID != bootID {
			d.log.Warn("restore: the flight recorder holds another boot's records; nothing rebuilt", "boot_id", h.Meta.BootID)
			return nil, res
		}
		sessions[h.Session] = true
	}
	res.sessions = len(sessions)
	var last uint64
	for {
		e, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			d.log.Warn("restore: flight recorder replay stopped", "err", err)
			break
		}
		res.events++
		last = max(last, e.Boot)
		d.observe(e)
	}
	// the earlier run watched until its counters were last written
	// (every second), not only until its last event
	if at := r.Stats().At; at > last && at <= d.deps.Boot() {
		last = at
	}
	d.model.Advance(last)
	res.gapFrom = last
	found := d.found
	d.found = nil
	return found, res
}

// findingKey is what names a finding across runs: its kind, its QP and
// its first event's Boot (the same boot: the clock goes on).
type findingKey struct {
	kind  apm.Kind
	dev   string
	qpn   uint32
	first uint64
}

func keyOf(f apm.Finding) findingKey {
	return findingKey{f.Kind, f.QP.Device, f.QP.QPN, f.First}
}

// openOf is the findings of fs still open at its end, as the daemon counts
// them (warning and above, not resolved).
func openOf(fs []apm.Finding) map[uint64]apm.Finding {
	open := map[uint64]apm.Finding{}
	for _, f := range fs {
		switch {
		case f.Resolved:
			delete(open, f.Resolves)
		case f.Severity >= apm.SevWarning:
			open[f.ID] = f
		}
	}
	return open
}

// restored puts what the restore rebuilt back into the open findings and
// hands it to the actor; the probes are attached by now.
func (d *daemon) restored(res restoreResult) {
	for _, f := range res.reopened {
		d.open[f.ID] = open{kind: f.Kind, qp: f.QP}
		d.m.openFindings.WithLabelValues(string(f.Kind)).Inc()
	}
	if res.sessions > 0 || len(res.reopened) > 0 || res.lost > 0 {
		d.log.Info("restored from the flight recorder and the finding log", "sessions", res.sessions, "events", res.events,
			"open_findings", len(res.reopened), "written_now", res.unlogged, "not_rebuilt", res.lost)
	}
	if res.lost > 0 {
		d.log.Warn("open findings of an earlier run not rebuilt: their QP is gone, has another owner, or its records left the flight recorder",
			"findings", res.lost)
	}
	if d.cfg.Actor == nil {
		return
	}
	for _, f := range res.reopened {
		for _, a := range d.cfg.Actor.Act(d.ctx, f) {
			d.finding(d.actorID(a), false)
		}
	}
}
