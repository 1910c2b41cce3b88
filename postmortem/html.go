package postmortem

import (
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"time"
)

//go:embed report.html.tmpl
var htmlText string

//go:embed report.js
var htmlScript string

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"full": fullStamp,
}).Parse(htmlText))

// fullStamp is a time as the page shows it: date, time to the nanosecond.
func fullStamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000000000 UTC") }

// svg geometry
const (
	svgWidth  = 1200
	laneLeft  = 190 // room for the lane names
	laneRight = 20
	plotW     = svgWidth - laneLeft - laneRight
	laneH     = 60
	stackDX   = 14 // between findings at one time on one lane
	triangle  = "M0 -5 l6 10 h-12 z"
	diamond   = "M0 -7 l7 7 l-7 7 l-7 -7 z"
	axisH     = 44
	// the compressed view shows [viewLo, viewHi] of its [0, 1] positions
	viewLo, viewHi = -0.03, 1.03
)

type htmlView struct {
	R         *Report
	Origin    string // the first mark of the page, in full
	Kinds     []kindCount
	Rows      []findingRow
	Timelines []svgTimeline
	Data      pageData // for the script, as JSON
	Script    template.JS
}

type kindCount struct {
	Kind string
	N    int
}

type findingRow struct {
	ID       string // the element id of the finding, "f-3"
	Time     string // in full
	Offset   string // from the page's origin
	Evidence []string
	F        *Finding
}

type svgTimeline struct {
	ID     string
	Title  string
	Sub    []string // episode and LAP lines
	Date   string   // of the page's origin
	Width  int
	Left   int // of the plot
	Right  int
	PlotW  int
	Height int
	LaneH  int
	Lanes  []svgLane
	Ticks  []svgTick
	Bands  []svgBand
	Marks  []svgMark
}

type svgLane struct {
	Y, Top   int
	Class    string // side-a, side-b
	Side, QP string // two lines of the lane's name
}

type svgTick struct {
	X            int
	Clock, Label string // time of day, offset from the page's origin
	Anchor       string // of the labels: middle, or end at the right edge
}

type svgBand struct {
	ID         string
	X, W, Y, H int
	LabelY     int
	Class      string // band rearmed, band open
	Label, Tip string
}

type svgMark struct {
	ID     string
	X, Y   int
	Circle bool // else Rect, else a path of D
	Rect   bool
	D      string
	Class  string // mark and the event kind, finding and severity, fail
	Tip    string
}

// WriteHTML writes the report as one self-contained HTML page: no network,
// no external assets; inline SVG timelines (the compressed view, readable
// without the script), and a small inline script for hover details, the
// linear scale, zoom, and the evidence of a finding on click. Everything
// the script needs is in one JSON block.
func WriteHTML(w io.Writer, r *Report) error {
	r = escaped(r)
	v := htmlView{R: r, Script: template.JS(htmlScript)}
	for _, k := range slices.Sorted(maps.Keys(r.Summary.Findings)) {
		v.Kinds = append(v.Kinds, kindCount{k, r.Summary.Findings[k]})
	}
	origin := pageOrigin(r)
	v.Origin = fullStamp(origin)
	v.Data = pageData{T0Sec: origin.Unix(), T0Nsec: int64(origin.Nanosecond()), View: [2]float64{viewLo, viewHi}, PlotWidth: plotW, StackDX: stackDX,
		Findings: []findingData{}, Timelines: []timelineData{}}
	for i := range r.Findings {
		f := &r.Findings[i]
		row := findingRow{ID: findingID(i), F: f, Time: fullStamp(f.FirstTime), Offset: offset(origin, f.FirstTime)}
		for _, e := range f.Evidence {
			row.Evidence = append(row.Evidence, offset(origin, evidenceTime(f, e))+" "+e.What)
		}
		v.Rows = append(v.Rows, row)
		v.Data.Findings = append(v.Data.Findings, findingData{ID: row.ID, Evidence: []string{}, Points: []pointData{}})
	}
	for _, l := range layout(r) {
		t := timeline(r, &v.Data, l, origin)
		v.Timelines = append(v.Timelines, t)
	}
	return htmlTmpl.Execute(w, v)
}

// pageOrigin is the first time any timeline or finding shows: offsets on
// the page count from it.
func pageOrigin(r *Report) time.Time {
	var first time.Time
	see := func(t time.Time) {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	for _, q := range r.QPs {
		for _, e := range q.Entries {
			see(e.Time)
		}
	}
	for _, f := range r.Findings {
		see(f.FirstTime)
	}
	if first.IsZero() {
		for _, rec := range r.Recordings {
			see(rec.Start)
		}
	}
	return first
}

func offset(origin, t time.Time) string { return "+" + t.Sub(origin).String() }

func findingID(i int) string { return fmt.Sprintf("f-%d", i) }

// timeline lays out one SVG: a swimlane per QP (per side for a pair), a
// time axis, a band per migration episode, a mark per event and per
// finding; and the same geometry, as times and compressed positions, in
// the page's data.
func timeline(r *Report, data *pageData, l timelineLayout, origin time.Time) svgTimeline {
	id := fmt.Sprintf("tl-%d", len(data.Timelines))
	b := &tlBuilder{r: r, data: data, l: l, origin: origin,
		t: svgTimeline{ID: id, Title: l.title, Sub: l.sub, Width: svgWidth, Left: laneLeft, Right: svgWidth - laneRight, PlotW: plotW,
			Height: axisH + laneH*len(l.qps) + 4, LaneH: laneH, Date: origin.UTC().Format("2006-01-02") + " UTC"},
		d: timelineData{ID: id, Lanes: []laneData{}, Findings: []string{}, Bands: []bandData{}}}
	// every time the timeline shows, for the compressed scale
	var ts []time.Time
	var end time.Time
	for _, q := range l.qps {
		for _, e := range q.Entries {
			ts = append(ts, e.Time)
			end = later(end, e.Time)
		}
		for _, i := range q.Findings {
			ts = append(ts, r.Findings[i].FirstTime)
			for _, e := range r.Findings[i].Evidence {
				ts = append(ts, evidenceTime(&r.Findings[i], e))
			}
		}
	}
	bands := make([][]band, len(l.qps))
	for n, q := range l.qps {
		bands[n] = episodeBands(q, l.peerStarts[n], end)
		for _, bd := range bands[n] {
			ts = append(ts, bd.from, bd.to)
		}
	}
	var ticks []scaleTick
	b.c, ticks = logScale(ts)
	for _, tk := range ticks {
		st := svgTick{X: xOf(tk.c), Clock: tk.t.UTC().Format("15:04:05.000000"), Label: offset(origin, tk.t), Anchor: "middle"}
		if st.X > plotW-50 {
			st.Anchor = "end"
		}
		b.t.Ticks = append(b.t.Ticks, st)
	}
	for n, q := range l.qps {
		y := axisH + laneH*n + laneH/2
		b.t.Lanes = append(b.t.Lanes, svgLane{Y: y, Top: y - laneH/2, Class: []string{"side-a", "side-b"}[n%2],
			Side: clip(q.Side, 28), QP: fmt.Sprintf("%s/%d", q.Device, q.QPN)})
		b.d.Lanes = append(b.d.Lanes, laneData{Y: y, QP: l.index[n], T: []int64{}, C: []float64{}})
		b.bands(n, q, bands[n])
		b.events(n, q)
	}
	// findings after the events: drawn on top, and their evidence may be
	// an event of any lane
	for n, q := range l.qps {
		b.findings(n, q)
	}
	data.Timelines = append(data.Timelines, b.d)
	return b.t
}

// tlBuilder builds one timeline's markup (t) and data (d).
type tlBuilder struct {
	r      *Report
	data   *pageData
	l      timelineLayout
	origin time.Time
	c      func(time.Time) float64 // the compressed scale
	t      svgTimeline
	d      timelineData
}

func (b *tlBuilder) ns(at time.Time) int64 { return at.Sub(b.origin).Nanoseconds() }

func (b *tlBuilder) bands(n int, q *QP, bands []band) {
	y := b.d.Lanes[n].Y
	for k, bd := range bands {
		data := bandData{ID: fmt.Sprintf("%s-b%d-%d", b.d.ID, n, k), Lane: n,
			T: [2]int64{b.ns(bd.from), b.ns(bd.to)}, C: [2]float64{b.c(bd.from), b.c(bd.to)}}
		x1, x2 := xOf(data.C[0]), xOf(data.C[1])
		sb := svgBand{ID: data.ID, X: x1, W: max(x2-x1, 2), Y: y - laneH/2 + 2, H: laneH - 4, LabelY: y + laneH/2 - 6,
			Class: "band rearmed", Label: "rearmed"}
		cause := "migrated"
		if bd.peer {
			cause = "peer migrated"
		}
		outcome := "rearmed at"
		if !bd.rearmed {
			sb.Class, sb.Label, outcome = "band open", "no rearm", "no rearm by"
		}
		if bd.peer {
			sb.Label = cause + ", " + sb.Label
		}
		sb.Tip = fmt.Sprintf("%s %s at %s (%s); %s %s (%s later)", q.Side, cause, fullStamp(bd.from), offset(b.origin, bd.from),
			outcome, fullStamp(bd.to), bd.to.Sub(bd.from))
		b.t.Bands = append(b.t.Bands, sb)
		b.d.Bands = append(b.d.Bands, data)
	}
}

func (b *tlBuilder) events(n int, q *QP) {
	lane := &b.d.Lanes[n]
	for k, e := range q.Entries {
		m := svgMark{ID: eventID(lane.QP, k), X: xOf(b.c(e.Time)), Y: lane.Y, Class: "mark " + e.Kind,
			Tip: fmt.Sprintf("%s (%s)\n%s %s: %s", fullStamp(e.Time), offset(b.origin, e.Time), q.Side, e.What, e.Detail)}
		switch e.Kind {
		case "qp-event", "port-event":
			m.D = triangle
		case "mad", "cm-notify", "cm-handler":
			m.Rect = true
		default:
			m.Circle = true
		}
		if e.Fail {
			m.Class += " fail"
		}
		b.t.Marks = append(b.t.Marks, m)
		lane.T = append(lane.T, b.ns(e.Time))
		lane.C = append(lane.C, b.c(e.Time))
	}
}

func (b *tlBuilder) findings(n int, q *QP) {
	y := b.d.Lanes[n].Y
	stack := map[int64]int{}
	for _, i := range q.Findings {
		f := &b.r.Findings[i]
		fd := &b.data.Findings[i]
		fd.Timeline, fd.Lane, fd.T, fd.C = b.d.ID, n, b.ns(f.FirstTime), b.c(f.FirstTime)
		fd.Stack = stack[fd.T]
		stack[fd.T]++
		for _, e := range f.Evidence {
			at := evidenceTime(f, e)
			if ev := evidenceEvent(b.l, n, e, at); ev != "" {
				fd.Evidence = append(fd.Evidence, ev)
			} else {
				fd.Points = append(fd.Points, pointData{Lane: n, T: b.ns(at), C: b.c(at), What: e.What})
			}
		}
		b.t.Marks = append(b.t.Marks, svgMark{ID: fd.ID, X: xOf(fd.C) + stackDX*fd.Stack, Y: y - 20, D: diamond,
			Class: "finding sev-" + f.Severity.String(),
			Tip: fmt.Sprintf("[%d] %s (%s)\n%s %s: %s\n(click: its evidence)", i, fullStamp(f.FirstTime), offset(b.origin, f.FirstTime),
				f.Severity, f.Kind, f.Explanation)})
		b.d.Findings = append(b.d.Findings, fd.ID)
	}
}

func eventID(qp, entry int) string { return fmt.Sprintf("ev-%d-%d", qp, entry) }

// xOf is the x of a compressed position in the default view.
func xOf(c float64) int { return int(math.Round((c - viewLo) / (viewHi - viewLo) * plotW)) }

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

type scaleTick struct {
	t time.Time
	c float64
}

// logScale maps times to [0, 1] so that every gap between two consecutive
// distinct times takes room growing with the logarithm of its length:
// bursts of microseconds and pauses of seconds both stay readable. ts must
// hold every time that will be mapped.
func logScale(times []time.Time) (func(time.Time) float64, []scaleTick) {
	var ts []int64
	for _, t := range times {
		ts = append(ts, t.UnixNano())
	}
	slices.Sort(ts)
	ts = slices.Compact(ts)
	cum := make([]float64, len(ts))
	for i := 1; i < len(ts); i++ {
		cum[i] = cum[i-1] + 1 + math.Log1p(float64(ts[i]-ts[i-1])/1e3)
	}
	total := 1.0
	if len(cum) > 0 && cum[len(cum)-1] > 0 {
		total = cum[len(cum)-1]
	}
	c := func(at time.Time) float64 {
		i, _ := slices.BinarySearch(ts, at.UnixNano())
		if i >= len(ts) {
			i = len(ts) - 1
		}
		if i < 0 {
			return 0
		}
		return math.Round(cum[i]/total*1e7) / 1e7
	}
	var ticks []scaleTick
	last := -1
	for k := 0; k <= 5 && len(ts) > 0; k++ {
		want := total * float64(k) / 5
		i, _ := slices.BinarySearchFunc(cum, want, func(c, w float64) int { return cmp.Compare(c, w) })
		i = min(i, len(ts)-1)
		if i == last {
			continue
		}
		last = i
		ticks = append(ticks, scaleTick{time.Unix(0, ts[i]).UTC(), cum[i] / total})
	}
	return c, ticks
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
