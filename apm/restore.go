package apm

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
