package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// rearm-without-new-alternate: a rearm closes a migration's episode, and
// what it arms is the alternate in force at that moment: the last
// successful load of the episode (or of the same modify). It must exist
// and lead another way than the primary the QP runs on then. A migration
// copies the alternate into the primary, so a rearm with no new alternate
// arms onto the path the QP runs on (or onto none, where a firmware zeroes
// the alternate): no error is raised for that, and when that path fails
// the QP "migrates" onto it and dies (unprotected-failure). Returning to the path the QP left is a new alternate (the
// path came back).
//
// A bare rearm (no load attempted in the episode) is judged at the end of
// EpisodeLinger: an alternate load within it makes the episode a lap-race
// (steps 2 and 3 swapped) instead. A load onto the primary, or a refused
// load, is judged at the rearm.

const remedyNewAlt = "load a new alternate path on a different route than the current primary (IB_QP_ALT_PATH) before or with the rearm, after sending a LAP with it; " + stepsRemedy

// rearmNoAlt judges the alternate in force at the rearm ev of episode ep.
func (m *Model) rearmNoAlt(slot int32, q *qp, ep *episode, ev *event.Event) {
	if ep.done&dNoAlt != 0 {
		return
	}
	loaded := ep.altLoad.ok() && q.alt.valid()
	onPrimary := loaded && q.alt.same(q.primary)
	switch {
	case loaded && !onPrimary:
		m.protected(q, RearmWithoutAlt, NeverArmed, APMModifyFailed)
		return
	case !loaded && ep.altFailed == 0 && m.cfg.EpisodeLinger > 0:
		ep.bareRearm = refOf(ev)
		m.wake(slot, q, ev.Boot+uint64(m.cfg.EpisodeLinger))
		return
	}
	m.emitNoAlt(q, ep, refOf(ev), onPrimary)
}

// checkBareRearm judges a bare rearm once its linger window is over.
func (m *Model) checkBareRearm(q *qp, ep *episode, at uint64) uint64 {
	if !ep.bareRearm.ok() {
		return 0
	}
	dl := ep.bareRearm.boot + uint64(m.cfg.EpisodeLinger)
	if at < dl {
		return dl
	}
	if hold := m.callHold(q, dl, at, holdLoad); hold != 0 {
		return hold // an alternate load may be in progress (calls.go)
	}
	r := ep.bareRearm
	ep.bareRearm = ref{}
	m.emitNoAlt(q, ep, r, false)
	return 0
}

func (m *Model) emitNoAlt(q *qp, ep *episode, rearm ref, onPrimary bool) {
	ep.done |= dNoAlt
	f := Finding{Kind: RearmWithoutAlt, Remediation: remedyNewAlt, Last: rearm.boot,
		Evidence: []Evidence{evd(ep.mig, migWhat(ep))}}
	switch {
	case onPrimary:
		f.Evidence = append(f.Evidence, evd(ep.altLoad, "alternate load onto the current primary ("+q.primary.String()+")"))
		f.Explanation = fmt.Sprintf("migration %d was rearmed with an alternate path equal to the primary it runs on (%s), so the QP is armed with nowhere to fail over to", ep.n, q.primary)
	case ep.altFailed != 0:
		f.Explanation = fmt.Sprintf("migration %d was rearmed although the alternate-path load in this episode failed (errno %d), so the QP is armed with no valid alternate", ep.n, -ep.altFailed)
	default:
		f.Explanation = fmt.Sprintf("migration %d was rearmed without loading a new alternate path first, so the QP is armed onto a stale or invalid alternate (no error is raised for that)", ep.n)
	}
	f.Evidence = append(f.Evidence, evd(rearm, "rearm"))
	m.markUnprotected(q, ep.mig.boot, m.emit(q, f), RearmWithoutAlt)
}
