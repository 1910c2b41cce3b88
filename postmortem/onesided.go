package postmortem

import (
	"fmt"
	"sort"
	"time"

	"github.com/apmwatch/apmwatch/apm"
)

// oneSided judges every migration episode of every pair and returns the
// one-sided-rearm findings.
//
// An episode starts at a migration of one end; the other end's first
// migration before the first end migrates again is its part of the same
// episode, however late it was delivered, and each end's rearm deadline
// runs from its own migration (from the episode's start for an end not
// seen migrating). An end is said not to have rearmed only when its
// recording covers its window: a reading that turned ARMED or REARM within
// it shows a rearm the probes did not see (no finding), and missing
// records (events lost, damaged frames) overlapping it make the finding
// unconfirmed: a warning that names the loss.
func oneSided(ps []*pairing, deadline time.Duration, ids *apm.IDs) []finding {
	var out []finding
	for _, p := range ps {
		hs := [2]*hist{p.a, p.b}
		for _, ep := range episodes(hs) {
			out = append(out, p.judge(ep, deadline, ids)...)
		}
	}
	return out
}

// episode is one migration of a pair: per end, whether and when (wall
// ns) it migrated; start is the episode's start.
type episode struct {
	start    int64
	at       [2]int64
	migrated [2]bool
}

// episodes groups the migrations of the two ends.
func episodes(hs [2]*hist) []episode {
	type mig struct {
		t    int64
		side int
	}
	var migs []mig
	for side, h := range hs {
		for _, b := range h.migrations {
			migs = append(migs, mig{h.s.wall(b).UnixNano(), side})
		}
	}
	sort.SliceStable(migs, func(i, j int) bool { return migs[i].t < migs[j].t })
	var bySide [2][]int // indexes into migs, in time order
	for i, m := range migs {
		bySide[m.side] = append(bySide[m.side], i)
	}
	var ptr [2]int // the next migration of each end not yet in an episode
	var out []episode
	for {
		// the earliest migration not in an episode starts the next one
		s := -1
		for side := range 2 {
			if ptr[side] < len(bySide[side]) && (s < 0 || bySide[side][ptr[side]] < bySide[s][ptr[s]]) {
				s = side
			}
		}
		if s < 0 {
			return out
		}
		o := 1 - s
		t0 := migs[bySide[s][ptr[s]]].t
		ptr[s]++
		ep := episode{start: t0, at: [2]int64{t0, t0}}
		ep.migrated[s] = true
		if ptr[o] < len(bySide[o]) {
			t := migs[bySide[o][ptr[o]]].t
			if ptr[s] >= len(bySide[s]) || t < migs[bySide[s][ptr[s]]].t {
				ep.migrated[o], ep.at[o] = true, t
				ptr[o]++
			}
		}
		out = append(out, ep)
	}
}

// side is what one end's recording says of its rearm in an episode.
type side struct {
	rearmed int64  // wall ns of the rearm within the deadline, 0: none seen
	read    int64  // wall ns of a reading within the window showing a rearm, 0: none
	covered bool   // its recording reaches the deadline
	loss    string // missing records overlapping the window ("": none)
}

func (p *pairing) judge(e episode, deadline time.Duration, ids *apm.IDs) []finding {
	hs := [2]*hist{p.a, p.b}
	var sd [2]side
	for i, h := range hs {
		sd[i] = h.sideIn(e.at[i], e.at[i]+int64(deadline))
		if !e.migrated[i] {
			sd[i].read = 0 // ARMED all along: it never moved, so no rearm
		}
	}
	ep := Episode{Start: time.Unix(0, e.start).UTC(),
		MigratedA: tptr(e.migrated[0], e.at[0]), MigratedB: tptr(e.migrated[1], e.at[1]),
		RearmedA: tptr(sd[0].rearmed != 0, sd[0].rearmed), RearmedB: tptr(sd[1].rearmed != 0, sd[1].rearmed)}
	did := func(i int) bool { return sd[i].rearmed != 0 || sd[i].read != 0 }
	var out []finding
	switch {
	case did(0) && did(1):
		ep.Verdict = "both rearmed"
		for i, h := range hs {
			if sd[i].rearmed == 0 {
				ep.Verdict += fmt.Sprintf(" (%s's rearm was not seen: a reading shows it rearmed)", h.name())
			}
		}
	case !did(0) && !did(1) && sd[0].covered && sd[1].covered:
		ep.Verdict = "neither rearmed within the deadline"
	case !did(0) && !did(1), !did(0) && !sd[0].covered, !did(1) && !sd[1].covered:
		ep.Verdict = "undecided: a recording ends before the rearm deadline"
	default:
		yes := 0
		if did(1) {
			yes = 1
		}
		not := 1 - yes
		at := sd[yes].rearmed
		if at == 0 {
			at = sd[yes].read
		}
		f := oneSidedFinding(ids.Next(), hs[not], hs[yes], e.at[not], at, e.migrated[not], deadline)
		if l := sd[not].loss; l != "" {
			ep.Verdict = fmt.Sprintf("unconfirmed one-sided: %s rearmed; %s's rearm was not seen, but %s", hs[yes].name(), hs[not].name(), l)
			f.Severity = apm.SevWarning
			f.Uncertain = l
			f.Explanation += fmt.Sprintf(" (unconfirmed: %s, so its rearm may be among them)", l)
		} else {
			ep.Verdict = fmt.Sprintf("one-sided: %s rearmed, %s did not", hs[yes].name(), hs[not].name())
		}
		out = append(out, f)
	}
	p.episodes = append(p.episodes, ep)
	return out
}

// sideIn reads an end's recording over its window [from, to] (wall ns).
func (h *hist) sideIn(from, to int64) side {
	var sd side
	wall := func(b uint64) int64 { return h.s.wall(b).UnixNano() }
	// the first rearm at or after the start (rearms are in Boot order)
	k := sort.Search(len(h.rearms), func(k int) bool { return wall(h.rearms[k]) >= from })
	if k < len(h.rearms) && wall(h.rearms[k]) <= to {
		sd.rearmed = wall(h.rearms[k])
	}
	for _, b := range h.armedReads {
		if t := wall(b); t > from && t <= to {
			sd.read = t
			break
		}
	}
	sd.covered = sd.rearmed != 0 || wall(h.s.endBoot) >= to
	sd.loss = lossIn(h.s, from, to)
	return sd
}

// lossIn describes the missing records of s that overlap [from, to]
// (wall ns), "" when none do.
func lossIn(s *stream, from, to int64) string {
	var lost, damaged uint64
	for _, l := range s.losses {
		lo := s.wall(l.From).UnixNano()
		if l.To != ^uint64(0) && s.wall(l.To).UnixNano() < from || lo > to {
			continue
		}
		lost += l.Lost
		damaged += l.Damaged
	}
	return describeLoss(s.label, lost, damaged)
}

func describeLoss(label string, lost, damaged uint64) string {
	switch {
	case lost > 0 && damaged > 0:
		return fmt.Sprintf("%s's recording lost %d events and has %d damaged records in that window", label, lost, damaged)
	case lost > 0:
		return fmt.Sprintf("%s's recording lost %d events in that window", label, lost)
	case damaged > 0:
		return fmt.Sprintf("%s's recording has %d damaged records in that window", label, damaged)
	}
	return ""
}

func tptr(ok bool, ns int64) *time.Time {
	if !ok {
		return nil
	}
	t := time.Unix(0, ns).UTC()
	return &t
}

func oneSidedFinding(id uint64, not, did *hist, start, rearm int64, migrated bool, deadline time.Duration) finding {
	s := not.s
	boot := func(ns int64) uint64 { return uint64(ns - int64(s.offset) - int64(s.shift)) }
	why := "after its peer migrated"
	if migrated {
		why = "after migrating"
	}
	return finding{s: s, Finding: apm.Finding{
		ID: id, Kind: OneSidedRearm, Severity: apm.SevError,
		QP:  apm.Key{Device: not.device, QPN: not.qpn, Gen: not.gen},
		PID: not.pid, Comm: not.comm, First: boot(start), Last: boot(start + int64(deadline)),
		Evidence: []apm.Evidence{
			{Boot: boot(start), What: fmt.Sprintf("%s: migration episode starts", not.name())},
			{Boot: boot(rearm), What: fmt.Sprintf("%s (peer) rearmed (time on this side's clock, aligned)", did.name())},
			{Boot: boot(start + int64(deadline)), What: fmt.Sprintf("%s: no rearm within %v", not.name(), deadline)},
		},
		Explanation: fmt.Sprintf("%s rearmed but its peer %s did not within %v %s: the connection stays without failover (a QP becomes ARMED only when both sides rearmed and traffic flows)",
			did.name(), not.name(), deadline, why),
		Remediation: "rearm on both sides after every migration: on each side (1) send a LAP with the new alternate path, (2) load it with RTS->RTS IB_QP_ALT_PATH, (3) rearm with RTS->RTS IB_QP_PATH_MIG_STATE=REARM",
	}}
}
