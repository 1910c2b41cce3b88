package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// deadlines judges every time-bound rule of q at m.now and schedules the
// next wake-up.
func (m *Model) deadlines(slot int32, q *qp) {
	now := m.now
	var next uint64
	want := func(t uint64) {
		if t > now && (next == 0 || t < next) {
			next = t
		}
	}
	x := q.x
	if x != nil && x.ep != nil {
		ep := x.ep
		// missed-rearm: no successful rearm within the deadline while the
		// QP lives in RTS.
		if dl := ep.mig.boot + uint64(m.cfg.RearmDeadline); ep.done&dMissed == 0 && !ep.rearm.ok() {
			if now >= dl {
				ep.done |= dMissed
				if q.state == event.StateRTS {
					m.missedRearm(q, ep, dl)
				}
			} else {
				want(dl)
			}
		}
		// cm-not-notified: a CM-managed QP migrated and nobody told the CM.
		if dl := ep.mig.boot + uint64(m.cfg.NotifyDeadline); ep.done&dNotNotified == 0 && !ep.notify.ok() {
			if now >= dl {
				ep.done |= dNotNotified
				if q.flags&fCM != 0 && q.state != event.StateErr {
					m.notNotified(q, ep, dl)
				}
			} else {
				want(dl)
			}
		}
		// A rearmed episode lingers to catch a late alternate load and the
		// notify deadline, then only its summary stays.
		if ep.rearm.ok() {
			end := max(ep.rearm.boot+uint64(m.cfg.EpisodeLinger), ep.mig.boot+uint64(m.cfg.NotifyDeadline))
			if now >= end {
				x.prev = epSummary{n: ep.n, rearmed: true, rearmNoAlt: ep.done&dNoAlt != 0, forced: ep.forced}
				x.ep = nil
			} else {
				want(end)
			}
		}
	}
	if x != nil && x.lapRecv.ok() && x.lapStuckID == 0 {
		if dl := x.lapRecv.boot + uint64(m.cfg.LAPDeadline); now >= dl {
			m.lapStuck(q, x, dl)
		} else {
			want(dl)
		}
	}
	if x != nil && x.pendTruth != 0 {
		if dl := x.pendTruth + uint64(m.cfg.TruthGrace); now >= dl {
			m.judgeRearmTruth(q, x)
		} else {
			want(dl)
		}
	}
	if q.flags&fNeverArmedDone == 0 && m.unarmed(q) {
		if dl := max(q.altLoad.boot, q.rtsAt) + uint64(m.cfg.ArmDeadline); now >= dl {
			q.flags |= fNeverArmedDone
			m.neverArmed(q, dl)
		} else {
			want(dl)
		}
	}
	if next != 0 {
		m.wake(slot, q, next)
	}
}

func (m *Model) missedRearm(q *qp, ep *episode, dl uint64) {
	f := Finding{Kind: MissedRearm, Severity: SevError, Remediation: remedyRearm, Last: dl,
		Evidence: []Evidence{evd(ep.mig, migWhat(ep))}}
	if ep.event.ok() {
		f.Evidence = append(f.Evidence, evd(ep.event, "PATH_MIG"))
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
	ep.missedID = m.emit(q, f)
}

func (m *Model) notNotified(q *qp, ep *episode, dl uint64) {
	m.emit(q, Finding{Kind: CMNotNotified, Severity: SevError, Remediation: remedyNotify, Last: dl,
		Evidence:    []Evidence{evd(ep.mig, migWhat(ep))},
		Explanation: fmt.Sprintf("migration %d of a CM-managed QP was not reported with ib_cm_notify(PATH_MIG) within %v, so the CM keeps the dead path for DREQ and LAP", ep.n, m.cfg.NotifyDeadline)})
}

func (m *Model) lapStuck(q *qp, x *aux, dl uint64) {
	x.lapStuckID = m.emit(q, Finding{Kind: LAPRace, Severity: SevError, Remediation: remedyLAP, Last: dl,
		Evidence:    []Evidence{evd(x.lapRecv, "LAP received")},
		Explanation: fmt.Sprintf("a LAP was received and not answered with an APR within %v: the cm_id stays in LAP_RCVD and a later ib_cm_notify(PATH_MIG) fails with EINVAL (rdma_cm drops IB_CM_LAP_RECEIVED)", m.cfg.LAPDeadline)})
}

func (m *Model) neverArmed(q *qp, dl uint64) {
	m.emit(q, Finding{Kind: NeverArmed, Severity: SevWarning, Remediation: remedyNeverArm, Last: dl,
		First:       max(q.altLoad.boot, q.rtsAt),
		Evidence:    []Evidence{evd(q.altLoad, "alternate load (no rearm followed)")},
		Explanation: fmt.Sprintf("the QP has been in RTS with an alternate path (%s) loaded for %v and was never rearmed, so it still reads MIGRATED and cannot fail over", q.alt, m.cfg.ArmDeadline)})
}
