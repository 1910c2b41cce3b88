package postmortem

import (
	"fmt"
	"slices"
	"time"

	"github.com/apmwatch/apmwatch/apm"
)

// pageData is what the page's script reads from its JSON block: times are
// nanoseconds after the page's origin (T0), compressed positions are in
// [0, 1]. Element ids name the SVG marks.
type pageData struct {
	T0Sec     int64          `json:"t0_sec"` // the origin, Unix seconds and nanoseconds
	T0Nsec    int64          `json:"t0_nsec"`
	View      [2]float64     `json:"compressed_view"` // the compressed view's default window
	PlotWidth int            `json:"plot_width"`      // of each timeline's plot area
	StackDX   int            `json:"stack_dx"`        // between findings at one time on one lane
	Timelines []timelineData `json:"timelines"`
	Findings  []findingData  `json:"findings"` // one per Report.Findings, same order
}

type timelineData struct {
	ID       string     `json:"id"`
	Lanes    []laneData `json:"lanes"`
	Findings []string   `json:"findings"`
	Bands    []bandData `json:"bands"`
}

// laneData is a lane's events, in order: the k-th is the mark "ev-QP-k".
type laneData struct {
	Y  int       `json:"y"`
	QP int       `json:"qp"` // index in Report.QPs
	T  []int64   `json:"t"`
	C  []float64 `json:"c"`
}

type eventData struct {
	ID   string
	Lane int
	T    int64
	C    float64
}

// events lists a timeline's events as the script does.
func (tl timelineData) events() []eventData {
	var out []eventData
	for n, l := range tl.Lanes {
		for k := range l.T {
			out = append(out, eventData{ID: eventID(l.QP, k), Lane: n, T: l.T[k], C: l.C[k]})
		}
	}
	return out
}

type bandData struct {
	ID   string     `json:"id"`
	Lane int        `json:"lane"`
	T    [2]int64   `json:"t"` // from, to
	C    [2]float64 `json:"c"`
}

type findingData struct {
	ID       string      `json:"id"`
	Timeline string      `json:"timeline"` // "" when no timeline shows its QP
	Lane     int         `json:"lane"`
	T        int64       `json:"t"`
	C        float64     `json:"c"`
	Stack    int         `json:"stack"`    // findings before it at the same time on its lane: drawn side by side
	Evidence []string    `json:"evidence"` // ids of the events that are its evidence
	Points   []pointData `json:"points"`   // evidence that is no event (a deadline, a peer's time)
}

type pointData struct {
	Lane int     `json:"lane"`
	T    int64   `json:"t"`
	C    float64 `json:"c"`
	What string  `json:"what"`
}

// timelineLayout is what one timeline shows: a pair (two lanes) or one QP.
type timelineLayout struct {
	title      string
	sub        []string
	qps        []*QP
	index      []int         // of each lane's QP in Report.QPs
	peerStarts [][]time.Time // per lane: episodes its peer started without it migrating
}

// layout gives a timeline per pair, then one per unpaired QP.
func layout(r *Report) []timelineLayout {
	byID := map[string]int{}
	for i := range r.QPs {
		byID[r.QPs[i].ID] = i
	}
	var out []timelineLayout
	done := map[int]bool{}
	for _, p := range r.Pairs {
		a, okA := byID[p.A]
		b, okB := byID[p.B]
		if !okA || !okB {
			continue
		}
		done[a], done[b] = true, true
		l := timelineLayout{title: "pair " + p.A + " <-> " + p.B, qps: []*QP{&r.QPs[a], &r.QPs[b]}, index: []int{a, b},
			peerStarts: make([][]time.Time, 2)}
		for i, e := range p.Episodes {
			l.sub = append(l.sub, fmt.Sprintf("episode %d at %s: migrated a=%s b=%s; rearmed a=%s b=%s: %s", i+1,
				fullStamp(e.Start), rel(e.Start, e.MigratedA), rel(e.Start, e.MigratedB),
				rel(e.Start, e.RearmedA), rel(e.Start, e.RearmedB), e.Verdict))
			if e.MigratedA == nil {
				l.peerStarts[0] = append(l.peerStarts[0], e.Start)
			}
			if e.MigratedB == nil {
				l.peerStarts[1] = append(l.peerStarts[1], e.Start)
			}
		}
		for _, lp := range p.LAPs {
			l.sub = append(l.sub, fmt.Sprintf("LAP %s -> %s: %s", lp.From, lp.To, lp.Note))
		}
		out = append(out, l)
	}
	for i := range r.QPs {
		if !done[i] {
			out = append(out, timelineLayout{title: "qp " + r.QPs[i].ID, qps: []*QP{&r.QPs[i]}, index: []int{i},
				peerStarts: make([][]time.Time, 1)})
		}
	}
	return out
}

// band is one migration episode of one side: from its migration (or its
// peer's, when it saw none) to its rearm, or to the next migration or the
// end of the timeline when no rearm came.
type band struct {
	from, to      time.Time
	rearmed, peer bool
}

func episodeBands(q *QP, peerStarts []time.Time, end time.Time) []band {
	type start struct {
		t    time.Time
		peer bool
	}
	var migs []start
	for _, t := range q.MigratedAt {
		migs = append(migs, start{t, false})
	}
	for _, t := range peerStarts {
		migs = append(migs, start{t, true})
	}
	slices.SortStableFunc(migs, func(a, b start) int { return a.t.Compare(b.t) })
	var out []band
	for i, m := range migs {
		b := band{from: m.t, to: end, peer: m.peer}
		last := i+1 == len(migs)
		if !last {
			b.to = migs[i+1].t
		}
		for _, r := range q.RearmedAt {
			if !r.Before(m.t) && (last || r.Before(b.to)) {
				b.to, b.rearmed = r, true
				break
			}
		}
		if b.to.Before(b.from) {
			b.to = b.from
		}
		out = append(out, b)
	}
	return out
}

// evidenceTime is the aligned wall-clock time of a piece of evidence: its
// Boot stamp is on the finding's clock, like First.
func evidenceTime(f *Finding, e apm.Evidence) time.Time {
	return f.FirstTime.Add(time.Duration(int64(e.Boot) - int64(f.First)))
}

// evidenceEvent is the id of the timeline event a piece of evidence of a
// finding on lane n names: the event with its sequence number on that
// lane, else the event at its time (on that lane, then, for evidence that
// names no event, on the other lane: a peer's rearm). "" when none is shown.
func evidenceEvent(l timelineLayout, n int, e apm.Evidence, at time.Time) string {
	lanes := []int{n}
	if e.Seq == 0 {
		for k := range l.qps {
			if k != n {
				lanes = append(lanes, k)
			}
		}
	}
	if e.Seq != 0 {
		for k, en := range l.qps[n].Entries {
			if en.Seq == e.Seq {
				return eventID(l.index[n], k)
			}
		}
	}
	for _, lane := range lanes {
		for k, en := range l.qps[lane].Entries {
			if en.Time.Equal(at) {
				return eventID(l.index[lane], k)
			}
		}
	}
	return ""
}
