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
// A migration proves the QP was armed, and a rearm onto a new alternate
// protects it again (a stuck rearm stays until the QP reads ARMED).

const remedyUnprotected = "the connection was lost on a path failure while it had no armed alternate: fix what the cause finding says (after each migration, on each side: LAP, new alternate, rearm), and make sure both sides rearm and traffic flows"

// unprotected is why and since when a QP has no valid armed alternate.
type unprotected struct {
	since uint64
	cause uint64 // finding ID
	kind  Kind
	done  bool // unprotected-failure reported for this generation
}

// markUnprotected notes that finding id left the QP unprotected since t;
// an earlier cause that still holds is kept.
func (m *Model) markUnprotected(q *qp, since, id uint64, k Kind) {
	x := q.ax()
	if x.unprot == nil {
		x.unprot = &unprotected{}
	}
	if u := x.unprot; u.cause == 0 {
		u.since, u.cause, u.kind = since, id, k
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
	u.since, u.cause, u.kind = 0, 0, ""
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

// failed judges a loss of the connection at r.
func (m *Model) failed(q *qp, r ref, what string) {
	x := q.x
	if x == nil || x.unprot == nil || x.unprot.cause == 0 || x.unprot.done {
		return
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

// portEvent notes a PORT_ERR for the failure rule.
func (m *Model) portEvent(ev *event.Event) {
	if ev.Port == nil || ev.Port.Type != event.EvPortErr || ev.Device == "" {
		m.stats.Ignored++
		return
	}
	m.portErr[uint64(m.devID(ev.Device))<<32|uint64(ev.Port.Port)] = ev.Boot
}
