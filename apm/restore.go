package apm

import "github.com/apmwatch/apmwatch/event"

// A daemon that restarts rebuilds its model by replaying its own flight
// recorder (audit/restore.go). What the replay cannot give back is the
// earlier run's finding IDs (the replay allocates its own) and the time
// nobody watched; these are the model's side of it
// (TestRenumberKeepsResolutionsOnTheLoggedID, TestUnwatchedSpanMakesFindingsUncertain).

// Renumber gives a finding the model still refers to (a missed rearm it
// may resolve, a stuck rearm, a LAP answered late, the cause of an
// unprotected QP) the ID id instead of old, so that what it says later
// about that finding names the ID the earlier run wrote. It reports
// whether any reference changed.
func (m *Model) Renumber(old, id uint64) bool {
	if old == 0 || old == id {
		return false
	}
	changed := false
	swap := func(p *uint64) {
		if *p == old {
			*p, changed = id, true
		}
	}
	for _, slot := range m.qps.index {
		q := m.qps.at(slot)
		if q == nil || q.x == nil {
			continue
		}
		x := q.x
		swap(&x.lapStuckID)
		swap(&x.stuckID)
		if x.ep != nil {
			swap(&x.ep.missedID)
		}
		if x.unprot != nil {
			swap(&x.unprot.cause)
		}
	}
	return changed
}

// EachQP calls fn with each QP history the model holds.
func (m *Model) EachQP(fn func(QPView)) {
	for _, slot := range m.qps.index {
		if q := m.qps.at(slot); q != nil {
			v, _ := m.Lookup(m.devs.name(uint32(q.key>>32)), uint32(q.key))
			fn(v)
		}
	}
}

// Reopen gives the model back a missed rearm an earlier run reported and
// whose records are gone (the flight recorder keeps minutes): the QP is
// taken to have migrated at f.First and not to have been rearmed since, so
// that a later rearm (seen, or shown by a reading) resolves f under its
// ID. Only a missed-rearm still open, on a QP the model holds no
// migration of, is taken; the caller has checked that the QP is still the
// same (rdma netlink lists it under f's owner). It returns the QP's key in
// this model.
func (m *Model) Reopen(f Finding) (Key, bool) {
	if f.Kind != MissedRearm || f.Resolved || f.ID == 0 || f.QP.Device == "" || f.QP.QPN == 0 || f.First == 0 {
		return Key{}, false
	}
	_, q := m.get(m.keyOf(f.QP.Device, f.QP.QPN), true)
	if q == nil || (q.x != nil && q.x.ep != nil) {
		return Key{}, false
	}
	x := q.ax()
	ep := &episode{n: max(x.prev.n+1, 1), mig: ref{boot: f.First}, done: dMissed | dNotNotified, missedID: f.ID, missLast: f.Last}
	x.ep = ep
	x.last = lastMig{at: ep.mig}
	if q.flags&fStateKnown == 0 {
		q.state, q.flags = event.StateRTS, q.flags|fStateKnown
	}
	q.mig, q.migAt, q.flags = event.MigMigrated, f.First, q.flags&^fArmed|fMigKnown
	q.born = min(q.born, uint32(f.First/1e9))
	if q.pid == 0 {
		q.pid, q.comm = f.PID, m.comms.id(f.Comm)
	}
	m.markUnprotected(q, f.First, f.ID, MissedRearm)
	return m.keyView(q), true
}
