package postmortem

import (
	"fmt"
	"sort"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
)

// OneSidedRearm is the pairing layer's finding: after a migration one side
// of a connection rearmed and its peer did not within the rearm deadline,
// so the connection cannot fail over again (REARM becomes ARMED only when
// packets with MigReq=0 come from a rearmed peer).
const OneSidedRearm = apm.OneSidedRearm

// overlapSlack lets two histories pair when their recorded lifetimes miss
// each other by this much (one side set up before its recording started).
const overlapSlack = time.Minute

type pairing struct {
	a, b     *hist
	episodes []Episode
	laps     []LAP
}

// Pair is two ends of one connection.
type Pair struct {
	A        string    `json:"a"`
	B        string    `json:"b"`
	Episodes []Episode `json:"episodes"`
	LAPs     []LAP     `json:"laps"`
}

// Episode is one migration of a connection seen from both ends.
type Episode struct {
	Start     time.Time  `json:"start"`
	MigratedA *time.Time `json:"migrated_a,omitempty"`
	MigratedB *time.Time `json:"migrated_b,omitempty"`
	RearmedA  *time.Time `json:"rearmed_a,omitempty"`
	RearmedB  *time.Time `json:"rearmed_b,omitempty"`
	Verdict   string     `json:"verdict"`
}

// LAP is where one LAP of a pair went.
type LAP struct {
	From     string     `json:"from"`
	To       string     `json:"to"`
	Sent     *time.Time `json:"sent,omitempty"`
	Received *time.Time `json:"received,omitempty"`
	TID      uint64     `json:"tid"`
	Note     string     `json:"note"`
}

func overlap(a, b *hist) time.Duration {
	lo := max(a.s.wall(a.first).UnixNano(), b.s.wall(b.first).UnixNano())
	hi := min(a.s.wall(a.last).UnixNano(), b.s.wall(b.last).UnixNano())
	return time.Duration(hi - lo)
}

// oneSided judges every migration episode of every pair and returns the
// one-sided-rearm findings.
func oneSided(ps []*pairing, deadline time.Duration, ids *apm.IDs) []finding {
	var out []finding
	for _, p := range ps {
		type mig struct {
			t    int64
			side int
		}
		var migs []mig
		for side, h := range []*hist{p.a, p.b} {
			for _, b := range h.migrations {
				migs = append(migs, mig{h.s.wall(b).UnixNano(), side})
			}
		}
		sort.Slice(migs, func(i, j int) bool { return migs[i].t < migs[j].t })
		for i := 0; i < len(migs); {
			t0 := migs[i].t
			start := [2]int64{t0, t0}
			var migrated [2]bool
			j := i
			for ; j < len(migs) && migs[j].t <= t0+int64(deadline); j++ {
				if s := migs[j].side; !migrated[s] {
					migrated[s], start[s] = true, migs[j].t
				}
			}
			i = j
			ep := Episode{Start: time.Unix(0, t0).UTC()}
			var rearmed [2]int64
			var covered [2]bool
			for side, h := range []*hist{p.a, p.b} {
				end := start[side] + int64(deadline)
				// the first rearm at or after the start (rearms are in Boot order)
				k := sort.Search(len(h.rearms), func(k int) bool { return h.s.wall(h.rearms[k]).UnixNano() >= start[side] })
				if k < len(h.rearms) {
					if t := h.s.wall(h.rearms[k]).UnixNano(); t <= end {
						rearmed[side] = t
					}
				}
				covered[side] = rearmed[side] != 0 || h.s.wall(h.s.endBoot).UnixNano() >= end
			}
			ep.MigratedA, ep.MigratedB = tptr(migrated[0], start[0]), tptr(migrated[1], start[1])
			ep.RearmedA, ep.RearmedB = tptr(rearmed[0] != 0, rearmed[0]), tptr(rearmed[1] != 0, rearmed[1])
			hs := []*hist{p.a, p.b}
			switch {
			case rearmed[0] != 0 && rearmed[1] != 0:
				ep.Verdict = "both rearmed"
			case rearmed[0] == 0 && rearmed[1] == 0 && covered[0] && covered[1]:
				ep.Verdict = "neither rearmed within the deadline"
			case !covered[0] || !covered[1]:
				ep.Verdict = "undecided: a recording ends before the rearm deadline"
			default:
				did := 0
				if rearmed[1] != 0 {
					did = 1
				}
				not := 1 - did
				ep.Verdict = fmt.Sprintf("one-sided: %s rearmed, %s did not", hs[did].name(), hs[not].name())
				out = append(out, oneSidedFinding(ids.Next(), hs[not], hs[did], start[not], rearmed[did], migrated[not], deadline))
			}
			p.episodes = append(p.episodes, ep)
		}
	}
	return out
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

// lapIndex holds each stream's CM LAP MADs by the QP history they were
// tied to, and the received ones by (TID, sender's comm id), so that
// following the LAPs of every pair costs as much as the MADs.
type lapIndex struct {
	byHist map[*hist][]*mad
	recv   map[*stream]map[lapKey]*mad
}

type lapKey struct {
	tid   uint64
	local uint32
}

func indexLAPs(ss []*stream) lapIndex {
	x := lapIndex{byHist: map[*hist][]*mad{}, recv: map[*stream]map[lapKey]*mad{}}
	for _, s := range ss {
		x.recv[s] = map[lapKey]*mad{}
		for i := range s.mads {
			m := &s.mads[i]
			if m.attr != event.CMAttrLAP {
				continue
			}
			if m.h != nil {
				x.byHist[m.h] = append(x.byHist[m.h], m)
			}
			if k := (lapKey{m.tid, m.local}); m.dir == event.MADRecv && x.recv[s][k] == nil {
				x.recv[s][k] = m
			}
		}
	}
	return x
}

// of follows the LAPs of a pair: each LAP one side sent (or received)
// about the connection, and whether the other side's recording saw it
// arrive (or leave).
func (x lapIndex) of(a, b *hist) []LAP {
	var out []LAP
	received := map[uint64]bool{} // TIDs of the sends seen arriving
	for _, d := range [2][2]*hist{{a, b}, {b, a}} {
		x0, y := d[0], d[1]
		for _, m := range x.byHist[x0] {
			if m.dir != event.MADSend {
				continue
			}
			sent := x0.s.wall(m.boot)
			l := LAP{From: x0.name(), To: y.name(), Sent: &sent, TID: m.tid, Note: "not seen arriving in " + y.s.label + "'s recording"}
			if r := x.recv[y.s][lapKey{m.tid, m.local}]; r != nil {
				t := y.s.wall(r.boot)
				l.Received = &t
				l.Note = fmt.Sprintf("arrived after %v", t.Sub(sent))
				if r.h != y {
					l.Note += " but was not tied to the peer QP there"
				}
				received[m.tid] = true
			}
			out = append(out, l)
		}
		for _, m := range x.byHist[y] {
			if m.dir != event.MADRecv || received[m.tid] {
				continue
			}
			t := y.s.wall(m.boot)
			out = append(out, LAP{From: x0.name(), To: y.name(), Received: &t, TID: m.tid,
				Note: "received; its send is not in " + x0.s.label + "'s recording"})
		}
	}
	return out
}

func (p *pairing) report() Pair {
	out := Pair{A: p.a.id(), B: p.b.id(), Episodes: p.episodes, LAPs: p.laps}
	if out.Episodes == nil {
		out.Episodes = []Episode{}
	}
	if out.LAPs == nil {
		out.LAPs = []LAP{}
	}
	return out
}
