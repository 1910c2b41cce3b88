package apm

import (
	"fmt"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// missed-rearm: after a migration the QP runs on its old alternate, and its
// alternate is that same path (a migration copies), so it has nothing to
// fail over to. No successful rearm within RearmDeadline while the QP
// is in RTS is a finding; a rearm after it resolves it with the unprotected
// time. A QP in SQD or SQE keeps the deadline until it is back in RTS; ERR,
// RESET and destroy end the episode and the rule with it. A rearm call that
// entered before the deadline is judged by its entry (calls.go).

const remedyRearm = "rearm: " + stepsRemedy

// checkMissed judges the rearm deadline at at; it returns the deadline while
// it is still ahead.
func (m *Model) checkMissed(q *qp, ep *episode, at uint64) uint64 {
	dl := ep.mig.boot + uint64(m.cfg.RearmDeadline)
	if ep.done&dMissed != 0 || ep.rearm.ok() {
		return 0
	}
	if at < dl {
		return dl
	}
	if end := m.unwatchedOver(ep.mig.boot, dl); end != 0 {
		// The deadline fell while apmwatch was not running: not seeing a
		// rearm then is no evidence. The first reading after is judged
		// first; without one, nothing is claimed.
		grace := end + uint64(m.cfg.TruthGrace)
		if at < grace {
			return grace
		}
		if x := q.x; x == nil || x.readAt < end {
			ep.done |= dMissed
			return 0
		}
	}
	if p := ep.mis; p != nil && m.lossText(ep.mig.boot, p.read) != "" {
		// A reading shows it rearmed and records since the migration are
		// missing: the rearm was among them (loss.go). The reading is
		// judged first; no finding is raised against it.
		return max(p.read+uint64(m.cfg.TruthGrace), at+1)
	}
	if hold := m.callHold(q, dl, at, holdArm); hold != 0 {
		return hold // a rearm may be in progress: judged by its entry when it returns
	}
	switch q.state {
	case event.StateRTS:
		ep.done |= dMissed
		m.missedRearm(q, ep, max(dl, at))
	case event.StateSQD, event.StateSQE:
		// judged again when the QP returns to RTS
	default:
		ep.done |= dMissed
	}
	return 0
}

func (m *Model) missedRearm(q *qp, ep *episode, last uint64) {
	f := Finding{Kind: MissedRearm, Remediation: remedyRearm, Last: last,
		Evidence: []Evidence{evd(ep.mig, migWhat(ep))}}
	if ep.event.ok() {
		f.Evidence = append(f.Evidence, evd(ep.event, "PATH_MIG"))
	}
	if ep.stray.ok() {
		f.Evidence = append(f.Evidence, evd(ep.stray, "PATH_MIG again, with no rearm since (not a migration)"))
	}
	if c, ok := q.unreturned(ep.mig.boot+uint64(m.cfg.RearmDeadline), holdArm); ok {
		f.Evidence = append(f.Evidence, evd(ref{boot: c.at}, "modify call entered and not returned within "+m.cfg.CallWait.String()))
	}
	switch {
	case ep.altLoad.ok():
		f.Evidence = append(f.Evidence, evd(ep.altLoad, "alternate load (no rearm followed)"))
		f.Explanation = fmt.Sprintf("migration %d loaded a new alternate path but did not rearm within %v, so the QP in RTS has no armed alternate path", ep.n, m.cfg.RearmDeadline)
	case ep.altFailed != 0:
		f.Explanation = fmt.Sprintf("migration %d was not rearmed within %v (its alternate load failed with errno %d), so the QP in RTS has no armed alternate path", ep.n, m.cfg.RearmDeadline, -ep.altFailed)
	default:
		f.Explanation = fmt.Sprintf("migration %d was not followed by a rearm within %v, so the QP in RTS has no alternate path: the next failure of the primary breaks the connection", ep.n, m.cfg.RearmDeadline)
	}
	if x := q.x; x != nil && x.readAt != 0 {
		if end := m.unwatchedOver(ep.mig.boot, ep.mig.boot+uint64(m.cfg.RearmDeadline)); end != 0 && x.readAt >= end {
			f.Evidence = append(f.Evidence, evd(ref{boot: x.readAt}, "a reading of "+q.mig.String()+" after apmwatch was not running"))
		}
	}
	ep.missedID, ep.missLast = m.emit(q, f), last
	m.markUnprotected(q, ep.mig.boot, ep.missedID, MissedRearm)
}

// resolveMissed resolves the episode's missed-rearm at the rearm ev. A
// resolution is never dated before its finding: a rearm record that came
// after the finding but is stamped before it (a call judged by its entry)
// resolves it at the finding's time.
func (m *Model) resolveMissed(q *qp, ep *episode, ev *event.Event) {
	if ep.done&dNoAlt == 0 && !ep.bareRearm.ok() {
		m.protected(q, MissedRearm)
	}
	f := Finding{Kind: MissedRearm, Severity: SevInfo, Resolved: true, Resolves: ep.missedID,
		Unprotected: time.Duration(ev.Boot - ep.mig.boot), First: ep.mig.boot, Last: max(ev.Boot, ep.missLast),
		Evidence:    []Evidence{evd(ep.mig, migWhat(ep)), evd(refOf(ev), "rearm")},
		Explanation: fmt.Sprintf("migration %d was finally rearmed after %v: the QP ran unprotected for that long", ep.n, since(ep.mig.boot, ev.Boot)),
		Remediation: remedyRearm}
	if ev.Boot <= ep.mig.boot+uint64(m.cfg.RearmDeadline) {
		// Its call entered in time; its record (stamped at the entry)
		// came after the deadline was judged, with no announcement of
		// the call in progress (an older recorder, or a lost one).
		f.Explanation = fmt.Sprintf("migration %d was rearmed in time after all: the rearm call entered %v after it, within %v; its record came after the deadline was judged, so the missed rearm did not happen",
			ep.n, since(ep.mig.boot, ev.Boot), m.cfg.RearmDeadline)
	}
	m.emit(q, f)
}
