package postmortem

import (
	"fmt"
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
