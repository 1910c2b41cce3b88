package actuator

import "fmt"

// A QP number names one QP at a time, and the enforcer follows each
// number's generation from the event stream (generation.go). When the
// stream loses records (the probes' ring buffer was full, or the probes
// were re-attached), a destroy and a create of the number may be among
// them: a pending action may then name another QP, of another process,
// than the one its finding judged, and nothing the enforcer kept tells them
// apart (rdma netlink shows no creation, and the owner may never have
// been read). Such an action is dropped, logged and counted
// (EnforcerStats.DroppedLost): the finding stays, the QP is left alone.

// Lost tells the enforcer that the event stream lost records at or before
// at (CLOCK_BOOTTIME ns: when the counters that showed the loss were read,
// event.Stats.At; 0: now, by Boot). The pending actions
// about a migration at or before at are dropped now, and those of later
// findings about such a migration when they come. The audit loop calls it
// from its goroutine, like Observe.
func (e *Enforcer) Lost(at uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	if at == 0 {
		at = e.Boot()
	}
	e.lostAt = max(e.lostAt, at)
	e.keepWaiting(func(p pendingAct) bool {
		if why := e.lostSinceMigration(&p); why != "" {
			e.droppedLost(p, why)
			return false
		}
		return true
	})
}

// lostSinceMigration says why records lost at or after p's migration
// forbid acting on p ("" when none were).
func (e *Enforcer) lostSinceMigration(p *pendingAct) string {
	if e.lostAt == 0 || e.lostAt < p.since {
		return ""
	}
	return fmt.Sprintf("events were lost between its migration (boot %d ns) and the action (by boot %d ns): "+
		"the qp number may name another qp now", p.since, e.lostAt)
}

func (e *Enforcer) droppedLost(p pendingAct, why string) {
	e.stats.DroppedLost++
	e.dropped(p, why)
}
