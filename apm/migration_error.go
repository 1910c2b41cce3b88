package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// migration-error: a migration failed. Two ways, once per arming (again
// after the next rearm):
//   - PATH_MIG_ERR: IBTA's error for a migration request that was not
//     accepted; a firmware may also raise it for a dead alternate before
//     the QP goes to ERR;
//   - PATH_MIG, then the QP dies on the path it moved onto within
//     PortFailureWindow, before that path was proven. IBTA and rdmavt
//     migrate blindly when the retries on the primary run out: a dead
//     alternate gets the retries next, and then the work request completes
//     with RETRY_EXC_ERR and the QP goes to ERR with no async event. So the
//     death is the migration failing. Proven: a reading of ARMED after a
//     rearm since the migration (REARM turns ARMED only on a packet from
//     the peer on that path), a reading of the QP alive after every retry
//     on that path would have run out (from its alt_timeout), or the QP
//     outliving the window.
//
// A QP left unprotected before the migration failed (a rearm without a new
// alternate, which arms onto the path the QP runs on: the next failure of
// that path is a PATH_MIG onto it, or a firmware's PATH_MIG_ERR) gets the
// cause's unprotected-failure instead, never a migration-error: the remedy
// is the cause's (load a new alternate before rearming), not "the alternate
// path is bad".
//
// A death by the owner's hand (modify to ERR or RESET, destroy) counts only
// when the alternate is known bad: the path that had just failed (the QP
// was armed onto the path it ran on), or its port had a PORT_ERR before the
// migration. A PORT_ERR on the new primary's port after the migration is a
// new failure, not this one; and a QP left unprotected before the migration
// (a rearm without a new alternate after an earlier one) is the
// unprotected-failure of that cause instead.

const remedyMigErr = "the alternate path is bad: choose a working path, send a LAP with it, load it as the new alternate and rearm; the QP has no failover until then"

// migrationError applies PATH_MIG_ERR. On a QP left unprotected before it
// (a rearm without a new alternate armed it onto the path it runs on, or
// onto nothing) the failed migration is that cause's doing: no
// migration-error; the event is the sign that the path failed, and the
// QP's death is the cause's unprotected-failure (lost).
func (m *Model) migrationError(q *qp, ev *event.Event) {
	if u := q.ax().unprot; u != nil && u.cause != 0 && !u.done && u.since <= ev.Boot {
		q.x.migErrAt = ev.Boot
		return
	}
	if q.flags&fMigErrDone != 0 {
		return
	}
	q.flags |= fMigErrDone
	f := Finding{Kind: MigrationError, Remediation: remedyMigErr, First: ev.Boot, Last: ev.Boot,
		Evidence:    []Evidence{evd(refOf(ev), "PATH_MIG_ERR")},
		Explanation: fmt.Sprintf("PATH_MIG_ERR: the migration to the alternate path (%s) failed, the QP has no failover", q.alt)}
	if t := m.portDown(q, q.alt, ev.Boot); t != 0 {
		f.Evidence = append([]Evidence{evd(ref{boot: t}, fmt.Sprintf("PORT_ERR on port %d", q.alt.port))}, f.Evidence...)
		f.Explanation += fmt.Sprintf(" (its port had a PORT_ERR %v before)", since(t, ev.Boot))
	}
	if q.rearm.ok() && q.rearm.boot <= ev.Boot {
		f.Evidence = append([]Evidence{evd(q.rearm, "last rearm")}, f.Evidence...)
	}
	m.emit(q, f)
}

// migrationDied judges the QP's death at r against its last migration and
// reports whether it was that migration failing (then it is reported).
func (m *Model) migrationDied(q *qp, r ref, what string, strong bool) bool {
	l := q.lastMig()
	if l == nil || l.proven || q.flags&fMigErrDone != 0 || r.boot < l.at.boot || r.boot-l.at.boot > uint64(m.cfg.PortFailureWindow) {
		return false
	}
	if u := q.x.unprot; u != nil && u.cause != 0 && !u.done && u.since < l.at.boot {
		return false // unprotected before it migrated: that cause's failure
	}
	if t := m.portErr[q.key>>32<<32|uint64(q.primary.port)]; q.primary.valid() && t > l.at.boot && t <= r.boot {
		return false // the path it moved onto failed afterwards: a new failure
	}
	if !strong && !(l.same && !l.forced) && l.stale == 0 {
		return false // an owner's teardown with no sign the alternate was bad
	}
	q.flags |= fMigErrDone
	mig := "PATH_MIG"
	if l.forced {
		mig = "forced migration (modify PATH_MIG_STATE=MIGRATED)"
	}
	f := Finding{Kind: MigrationError, Remediation: remedyMigErr, Last: r.boot,
		Evidence: []Evidence{evd(l.at, mig)}}
	if l.stale != 0 {
		f.Evidence = append([]Evidence{evd(ref{boot: l.stale}, fmt.Sprintf("PORT_ERR on port %d", l.onto.port))}, f.Evidence...)
	}
	if q.altLoad.ok() && q.altLoad.boot <= l.at.boot {
		f.Evidence = append([]Evidence{evd(q.altLoad, "alternate load")}, f.Evidence...)
	}
	f.Evidence = append(f.Evidence, evd(r, what))
	f.Explanation = fmt.Sprintf("the QP migrated (%s) and died %v later (%s) before the path it moved onto was proven: %s; the HCA migrates blindly and the QP fails on a dead alternate when its retries run out (RETRY_EXC_ERR, no async event)",
		mig, since(l.at.boot, r.boot), what, staleWhy(q, l))
	m.emit(q, f)
	return true
}

// staleWhy names why the alternate a QP migrated onto was stale or
// unchecked.
func staleWhy(q *qp, l *lastMig) string {
	switch {
	case l.same:
		return fmt.Sprintf("its alternate was the path that had just failed (%s): no new alternate was loaded, and a migration copies the alternate into the primary, so a rearm without one arms onto the current path", l.onto)
	case l.stale != 0 && q.altLoad.ok() && q.altLoad.boot <= l.stale:
		return fmt.Sprintf("its alternate (%s) was loaded before a PORT_ERR on its port, %v before the migration", l.onto, since(l.stale, l.at.boot))
	case l.stale != 0:
		return fmt.Sprintf("its alternate (%s) was on a port that had a PORT_ERR %v before the migration", l.onto, since(l.stale, l.at.boot))
	case !l.onto.valid():
		return "its alternate was never loaded while the tool watched, so nothing checked it"
	}
	return fmt.Sprintf("its alternate (%s) was unchecked: nothing showed it carrying traffic", l.onto)
}
