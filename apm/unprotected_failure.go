package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// unprotected-failure: the cost of the other findings. A QP that runs
// without a valid armed alternate (an open missed-rearm,
// rearm-without-new-alternate, stuck-rearm or never-armed) and then loses
// its connection: the failure APM exists to survive killed it. The loss is
// the QP going to ERR by the hardware's hand: a reading shows ERR with no
// modify to ERR seen, a fatal QP event (QP_FATAL, QP_REQ_ERR,
// QP_ACCESS_ERR), or the owner's modify to ERR/RESET or destroy within
// PortFailureWindow of a PORT_ERR on the QP's primary port (the owner
// reacting to its error completions). Once per generation; the finding
// names the finding that left the QP unprotected (cause) and for how long.
// A migration onto another path proves the QP was armed and protected; a
// migration onto the path that failed (armed onto the path it ran on, by a
// rearm without a new alternate after a copy-migration) protects nothing,
// and the owner's teardown within PortFailureWindow after it is the loss.
// A rearm onto a new alternate protects it again (a stuck rearm stays until
// the QP reads ARMED). A QP that dies on the path a migration just moved it
// onto is a migration-error instead, unless it was unprotected before that
// migration.

const remedyUnprotected = "the connection was lost on a path failure while it had no armed alternate: fix what the cause finding says (after each migration, on each side: LAP, new alternate, rearm), and make sure both sides rearm and traffic flows"

// unprotected is why and since when a QP has no valid armed alternate.
type unprotected struct {
	since uint64
	cause uint64 // finding ID
	kind  Kind
	done  bool // unprotected-failure reported for this generation
	// idle: nothing shows traffic on the QP (the cause is a stuck rearm
	// of information severity, or a refused alternate load): the path
	// failure may never have touched it, so only the hardware's hand (a
	// reading in ERR) shows a loss, never the owner's teardown (an MPI job
	// ending after a port failure)
	idle bool
}

// markUnprotected notes that finding id left the QP unprotected since t;
// an earlier cause that still holds is kept.
func (m *Model) markUnprotected(q *qp, since, id uint64, k Kind) {
	x := q.ax()
	if x.unprot == nil {
		x.unprot = &unprotected{}
	}
	if u := x.unprot; u.cause == 0 {
		u.since, u.cause, u.kind, u.idle = since, id, k, false
	}
}

// markIdle notes that cause id, if it is what left the QP unprotected,
// shows no traffic on the QP.
func (m *Model) markIdle(q *qp, id uint64) {
	if x := q.x; x != nil && x.unprot != nil && x.unprot.cause == id {
		x.unprot.idle = true
	}
}

// protected clears the causes of the given kinds (all when none given).
func (m *Model) protected(q *qp, kinds ...Kind) {
	x := q.x
	if x == nil || x.unprot == nil || x.unprot.cause == 0 {
		return
	}
	u := x.unprot
	if len(kinds) > 0 {
		hit := false
		for _, k := range kinds {
			hit = hit || u.kind == k
		}
		if !hit {
			return
		}
	}
	u.since, u.cause, u.kind, u.idle = 0, 0, "", false
}

// portFailed reports whether a PORT_ERR came on the QP's primary port within
// PortFailureWindow before at.
func (m *Model) portFailed(q *qp, at uint64) (uint64, bool) {
	if !q.primary.valid() {
		return 0, false
	}
	t, ok := m.portErr[q.key>>32<<32|uint64(q.primary.port)]
	return t, ok && t <= at && at-t <= uint64(m.cfg.PortFailureWindow)
}

// portErrAt is the last PORT_ERR on any port of the host.
type portErrAt struct {
	boot  uint64
	where string
}

// portFailedAnywhere returns the last PORT_ERR on any port of the host
// within PortFailureWindow before at: the sign that a QP gone to ERR
// by itself lost a path (a link failure between the hosts takes a port
// down at one end at least; the peer's end is another host's).
func (m *Model) portFailedAnywhere(at uint64) (portErrAt, bool) {
	t := m.lastPortErr
	return t, t.boot != 0 && t.boot <= at && at-t.boot <= uint64(m.cfg.PortFailureWindow)
}

// portDown returns the Boot of a PORT_ERR on r's port within
// PortFailureWindow before at with no PORT_ACTIVE since: the port was down
// at at as far as the events tell. 0: not down, or no path.
func (m *Model) portDown(q *qp, r route, at uint64) uint64 {
	if !r.valid() {
		return 0
	}
	k := q.key>>32<<32 | uint64(r.port)
	t, ok := m.portErr[k]
	if !ok || t > at || at-t > uint64(m.cfg.PortFailureWindow) {
		return 0
	}
	if up, ok := m.portUp[k]; ok && up > t && up <= at {
		return 0
	}
	return t
}

// lost judges the end of a QP's connection at r, before the model moves it
// to ERR or forgets it. It is a path failure only with a sign that a path
// failed: a PORT_ERR on its primary port, or a PATH_MIG onto the path that
// had failed; or, when strong (by the hardware's hand: a reading in ERR
// with no modify to ERR seen, as after RETRY_EXC_ERR), a PORT_ERR on any
// port of the host. Otherwise (the owner's modify to ERR or RESET, a
// destroy, a peer that went away) it is no path failure. QP error events
// (QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR) never come here: they are local or
// application errors (deathsNotPathFailures).
func (m *Model) lost(q *qp, r ref, what string, strong bool) {
	if m.migrationDied(q, r, what, strong) {
		return
	}
	if t, ok := m.portFailed(q, r.boot); ok {
		m.failed(q, r, fmt.Sprintf("%s %v after PORT_ERR on port %d", what, since(t, r.boot), q.primary.port), strong)
		return
	}
	if l := q.lastMig(); l != nil && l.same && !l.forced && r.boot >= l.at.boot && r.boot-l.at.boot <= uint64(m.cfg.PortFailureWindow) {
		m.failed(q, r, fmt.Sprintf("%s %v after a PATH_MIG onto the path that had failed", what, since(l.at.boot, r.boot)), strong)
		return
	}
	if x := q.x; x != nil && x.migErrAt != 0 && r.boot >= x.migErrAt && r.boot-x.migErrAt <= uint64(m.cfg.PortFailureWindow) {
		m.failed(q, r, fmt.Sprintf("%s %v after PATH_MIG_ERR (the migration onto the alternate failed)", what, since(x.migErrAt, r.boot)), strong)
		return
	}
	// ERR by the hardware's hand, cause unread: a path failure only with
	// a port failure on the host to show for it (a peer that went away
	// leaves none)
	if t, ok := m.portFailedAnywhere(r.boot); ok && strong {
		m.failed(q, r, fmt.Sprintf("%s %v after a PORT_ERR on %s", what, since(t.boot, r.boot), t.where), strong)
	}
}

// failed judges a loss of the connection at r (strong: by the hardware's
// hand, see lost).
func (m *Model) failed(q *qp, r ref, what string, strong bool) {
	x := q.x
	if x == nil || x.unprot == nil || x.unprot.cause == 0 || x.unprot.done {
		return
	}
	if x.unprot.idle && !strong {
		return // TestUnprotectedFailureIdleTeardown
	}
	u := x.unprot
	u.done = true
	f := Finding{Kind: UnprotectedFailure, Remediation: remedyUnprotected, Cause: u.cause,
		First: u.since, Last: r.boot, Unprotected: since(u.since, r.boot),
		Evidence: []Evidence{
			evd(ref{boot: u.since}, fmt.Sprintf("unprotected from here: %s (finding %d)", u.kind, u.cause)),
			evd(r, what),
		},
		Explanation: fmt.Sprintf("the QP lost its connection (%s) after running %v without a valid armed alternate (%s, finding %d): a path failure that APM would have survived killed it", what, since(u.since, r.boot), u.kind, u.cause)}
	m.emit(q, f)
}

// portEvent notes a PORT_ERR (and the PORT_ACTIVE that ends it) for the
// failure rules.
func (m *Model) portEvent(ev *event.Event) {
	if ev.Port == nil || ev.Device == "" || (ev.Port.Type != event.EvPortErr && ev.Port.Type != event.EvPortActive) {
		m.stats.Ignored++
		return
	}
	k := uint64(m.devID(ev.Device))<<32 | uint64(ev.Port.Port)
	if ev.Port.Type == event.EvPortErr {
		m.portErr[k] = ev.Boot
		m.lastPortErr = portErrAt{boot: ev.Boot, where: fmt.Sprintf("%s port %d", ev.Device, ev.Port.Port)}
	} else {
		m.portUp[k] = ev.Boot
	}
}
