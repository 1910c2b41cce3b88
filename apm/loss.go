package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// Lost records the source cannot give: events its ring buffer dropped,
// records of a recording that are damaged. The model is told of them
// (Model.Lost) and claims nothing they could have changed
// (TestFindingsUnderLoss):
//   - a finding whose window, or its QP generation's history before it,
//     overlaps a loss says so (Finding.Uncertain, and its explanation);
//   - a reading that shows a migrated QP rearmed when a loss overlaps the
//     time since its migration ends the episode as rearmed (the rearm was
//     among the lost records), never as a missed rearm nor a mismatch;
//   - a reading of MIGRATED after a rearm, with a loss since the rearm, is
//     no mismatch: the PATH_MIG may be among the lost records.

// lossSpan is a stretch of Boot time with missing records.
type lossSpan struct {
	from, to      uint64
	lost, damaged uint64
	// unwatched: nothing recorded at all (apmwatch was not running
	// between two of its runs), so how many records are missing is not
	// known
	unwatched bool
}

// maxLossSpans bounds the spans kept; past it the two oldest merge.
const maxLossSpans = 64

// Lost tells the model that records are missing between Boot from and to
// (to 0: up to now): lost events the source counted, damaged records the
// reader skipped.
func (m *Model) Lost(from, to, lost, damaged uint64) {
	if lost == 0 && damaged == 0 {
		return
	}
	if to == 0 || to < from {
		to = ^uint64(0)
	}
	m.addLoss(lossSpan{from: from, to: to, lost: lost, damaged: damaged})
}

// addLoss keeps a span, the two oldest merged past maxLossSpans.
func (m *Model) addLoss(l lossSpan) {
	if len(m.losses) >= maxLossSpans {
		a, b := m.losses[0], m.losses[1]
		m.losses[1] = lossSpan{from: min(a.from, b.from), to: max(a.to, b.to), lost: a.lost + b.lost, damaged: a.damaged + b.damaged,
			unwatched: a.unwatched || b.unwatched}
		m.losses = m.losses[1:]
	}
	m.losses = append(m.losses, l)
	m.stats.LossSpans++
}

// Unwatched tells the model that nothing was recorded between Boot from
// and to: apmwatch did not run (a daemon restarted on its flight
// recorder). It is a loss of unknown size: what happened then may have
// changed anything the model believes, and is never evidence.
func (m *Model) Unwatched(from, to uint64) {
	if to <= from {
		return
	}
	m.addLoss(lossSpan{from: from, to: to, unwatched: true})
}

// lossIn sums the missing records that overlap [from, to], and the time
// in it nothing was watched.
func (m *Model) lossIn(from, to uint64) (lost, damaged, unwatched uint64) {
	for _, l := range m.losses {
		if l.to >= from && l.from <= to {
			lost += l.lost
			damaged += l.damaged
			if l.unwatched {
				unwatched += min(l.to, to) - max(l.from, from)
			}
		}
	}
	return lost, damaged, unwatched
}

// lossText describes the missing records overlapping [from, to] ("":
// none).
func (m *Model) lossText(from, to uint64) string {
	lost, damaged, unwatched := m.lossIn(from, to)
	t := countText(lost, damaged)
	if unwatched > 0 || m.unwatchedIn(from, to) {
		w := fmt.Sprintf("apmwatch was not running for %.1f s of the QP's history", float64(unwatched)/1e9)
		if t == "" {
			return w
		}
		return w + ", and " + t
	}
	return t
}

// unwatchedOver returns the end of the last unwatched span that overlaps
// [from, to], 0 when none does: a deadline that fell while nobody watched
// is judged only on what was seen after (TestUnwatchedDeadlines).
func (m *Model) unwatchedOver(from, to uint64) uint64 {
	end := uint64(0)
	for _, l := range m.losses {
		if l.unwatched && l.to >= from && l.from <= to {
			end = max(end, l.to)
		}
	}
	return end
}

// unwatchedIn reports an unwatched span that touches [from, to].
func (m *Model) unwatchedIn(from, to uint64) bool {
	for _, l := range m.losses {
		if l.unwatched && l.to >= from && l.from <= to {
			return true
		}
	}
	return false
}

// countText describes counted missing records ("": none).
func countText(lost, damaged uint64) string {
	switch {
	case lost > 0 && damaged > 0:
		return fmt.Sprintf("%d events lost and %d damaged records in the QP's history", lost, damaged)
	case lost > 0:
		return fmt.Sprintf("%d events lost in the QP's history", lost)
	case damaged > 0:
		return fmt.Sprintf("%d damaged records in the QP's history", damaged)
	}
	return ""
}

// uncertain marks a finding of q whose window overlaps missing records,
// or whose QP's history before it does: the model's belief of its paths
// and states stands on every record of its generation.
func (m *Model) uncertain(q *qp, f *Finding) {
	if f.Resolved || len(m.losses) == 0 {
		return
	}
	from := min(f.First, uint64(q.born)*1e9)
	if t := m.lossText(from, f.Last); t != "" {
		f.Uncertain = t
		f.Explanation += " (uncertain: " + t + "; what they held is not known)"
	}
}

// rearmedUnseen ends a migration's episode that a reading shows rearmed
// (REARM or ARMED) while records since the migration are missing: the
// rearm was among them. A missed-rearm already raised is resolved, one
// still pending will not be.
func (m *Model) rearmedUnseen(q *qp, ep *episode, p *pendingMismatch, loss string) {
	ep.rearm = ref{boot: p.read}
	if ep.done&dMissed != 0 && ep.missedID != 0 {
		m.emit(q, Finding{Kind: MissedRearm, Severity: SevInfo, Resolved: true, Resolves: ep.missedID,
			First: ep.mig.boot, Last: max(p.read, ep.missLast),
			Evidence: []Evidence{evd(ep.mig, migWhat(ep)), evd(ref{boot: p.read}, p.truth.Source+" reads "+p.truth.Mig.String())},
			Explanation: fmt.Sprintf("migration %d was rearmed: %s reads %s (the rearm was not seen: %s), so the missed rearm is not known to have happened",
				ep.n, p.truth.Source, p.truth.Mig, loss),
			Remediation: remedyRearm})
		m.protected(q, MissedRearm)
	}
	ep.done |= dMissed | dMismatch
}

// LossWatch tells a model of the losses a live source's counters show:
// give it each Stats snapshot; a Lost counter that grew is a loss between
// the previous snapshot and this one, a Missed counter that grew one
// between the previous reading of it and this one (MissedAt).
type LossWatch struct{ ring, missed lossCounter }

type lossCounter struct{ n, at uint64 }

// Check compares s with the previous snapshot.
func (w *LossWatch) Check(m *Model, s event.Stats) {
	w.ring.check(m, s.Lost, s.At)
	at := s.MissedAt
	if at == 0 {
		at = s.At
	}
	w.missed.check(m, s.Missed, at)
}

func (c *lossCounter) check(m *Model, n, at uint64) {
	if n < c.n { // a new source: its counters start afresh
		c.n = 0
	}
	if n > c.n && m != nil {
		m.Lost(c.at, at, n-c.n, 0)
	}
	c.n = n
	if at != 0 {
		c.at = at
	}
}
