package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// stuck-rearm: REARM becomes ARMED only when a packet with MigReq=0 arrives
// from the peer, so a QP that keeps reading REARM for StuckRearm has a peer
// that never rearmed, or no traffic. The clock starts at the rearm (or the
// first REARM reading) and restarts at every migration and rearm; a QP in
// ERR or RESET is never stuck. A reading of anything else resolves it. An
// idle connection that rearmed correctly also reads REARM until its first
// packet, so the finding is a warning only when traffic is known to flow
// (the HCA migrated the QP: requests were outstanding), else information
// (TestStuckRearmSeverity).

const remedyStuck = "REARM becomes ARMED only when a packet with MigReq=0 arrives: make sure the peer did its three steps (LAP, load new alternate, rearm) and that traffic flows"

// stuckRestart restarts the clock at a rearm (a finding already open stays
// open: the QP is still in REARM) and at a migration, which proves the QP
// was ARMED: that resolves an open finding.
func (m *Model) stuckRestart(q *qp, r ref, migrated bool) {
	x := q.x
	if x == nil || x.rearmSince == 0 {
		return
	}
	if !migrated {
		x.rearmSince = r.boot
		return
	}
	if x.stuckID != 0 {
		m.resolveStuck(q, x, r, "migration")
	}
	x.rearmSince, x.stuckID = 0, 0
}

// stuckReading judges one reading.
func (m *Model) stuckReading(q *qp, ev *event.Event) {
	t := ev.Truth
	rd := ref{boot: ev.Boot}
	if t.Mig != event.MigRearm || t.State == event.StateErr || t.State == event.StateReset {
		if x := q.x; x != nil {
			if x.stuckID != 0 {
				m.resolveStuck(q, x, rd, t.Source+" reads "+t.Mig.String())
			}
			x.rearmSince, x.stuckID = 0, 0
		}
		return
	}
	x := q.ax()
	if x.rearmSince == 0 {
		x.rearmSince = ev.Boot
		if q.mig == event.MigRearm && q.rearm.ok() && q.rearm.boot <= ev.Boot {
			x.rearmSince = q.rearm.boot
		}
	}
	if x.stuckID != 0 || ev.Boot < x.rearmSince || ev.Boot-x.rearmSince <= uint64(m.cfg.StuckRearm) {
		return
	}
	evs := []Evidence{evd(rd, t.Source+" reads REARM")}
	if q.rearm.ok() && q.rearm.boot == x.rearmSince {
		evs = append([]Evidence{evd(q.rearm, "rearm")}, evs...)
	}
	f := Finding{Kind: StuckRearm, Remediation: remedyStuck,
		First: x.rearmSince, Last: ev.Boot, Evidence: evs,
		Explanation: fmt.Sprintf("the QP has read REARM for %v (limit %v) and never became ARMED: the peer has not rearmed, though traffic flowed (the HCA migrated it)", since(x.rearmSince, ev.Boot), m.cfg.StuckRearm)}
	if l := q.lastMig(); l == nil || l.forced {
		// An idle connection that rearmed correctly reads REARM until its
		// first packet: without a sign of traffic, only information.
		f.Explanation = fmt.Sprintf("the QP has read REARM for %v (limit %v) and never became ARMED: either the peer has not rearmed, or no packet has come since the rearm (an idle connection stays REARM until its first packet; nothing shows traffic on this QP)", since(x.rearmSince, ev.Boot), m.cfg.StuckRearm)
		x.stuckID, x.stuckLast = m.emitInfo(q, f), ev.Boot
		m.markUnprotected(q, x.rearmSince, x.stuckID, StuckRearm)
		m.markIdle(q, x.stuckID)
		return
	}
	x.stuckID, x.stuckLast = m.emit(q, f), ev.Boot
	m.markUnprotected(q, x.rearmSince, x.stuckID, StuckRearm)
}

func (m *Model) resolveStuck(q *qp, x *aux, r ref, what string) {
	m.protected(q, StuckRearm)
	m.emit(q, Finding{Kind: StuckRearm, Severity: SevInfo, Resolved: true, Resolves: x.stuckID,
		First: x.rearmSince, Last: max(r.boot, x.stuckLast), Remediation: remedyStuck,
		Evidence:    []Evidence{evd(r, what)},
		Explanation: fmt.Sprintf("the QP left REARM after %v (%s)", since(x.rearmSince, r.boot), what)})
}
