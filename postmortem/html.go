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
	"strings"
	"time"
)

//go:embed report.html.tmpl
var htmlText string

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"stamp": func(t time.Time) string { return t.Format(stamp) },
	"full":  func(t time.Time) string { return t.Format(time.RFC3339Nano) },
}).Parse(htmlText))

// svg geometry
const (
	svgWidth  = 1200
	laneLeft  = 190 // room for the lane names
	laneRight = 20
	laneH     = 56
	axisH     = 28
)

type htmlView struct {
	R         *Report
	Kinds     []kindCount
	Timelines []svgTimeline
}

type kindCount struct {
	Kind string
	N    int
}

type svgTimeline struct {
	Title  string
	Sub    []string // episode and LAP lines
	Width  int
	Height int
	Lanes  []svgLane
	Ticks  []svgTick
	Marks  []svgMark
}

type svgLane struct {
	Y, X2    int
	Side, QP string // two lines of the lane's name
}

type svgTick struct {
	X     int
	Label string
}

type svgMark struct {
	X, Y  int
	Shape string // circle, rect, path
	Class string // modify, qp-event, mad, cm, finding, fail
	Path  string // for Shape "path"
	Tip   string
}

// WriteHTML writes the report as one self-contained HTML page: no network,
// no external assets; inline SVG timelines with hover details.
func WriteHTML(w io.Writer, r *Report) error {
	r = escaped(r)
	v := htmlView{R: r}
	for _, k := range slices.Sorted(maps.Keys(r.Summary.Findings)) {
		v.Kinds = append(v.Kinds, kindCount{k, r.Summary.Findings[k]})
	}
	byID := map[string]*QP{}
	for i := range r.QPs {
		byID[r.QPs[i].ID] = &r.QPs[i]
	}
	done := map[string]bool{}
	for _, p := range r.Pairs {
		a, b := byID[p.A], byID[p.B]
		if a == nil || b == nil {
			continue
		}
		done[a.ID], done[b.ID] = true, true
		t := timeline(r, "pair "+a.ID+" <-> "+b.ID, []*QP{a, b})
		for i, e := range p.Episodes {
			t.Sub = append(t.Sub, fmt.Sprintf("episode %d at %s: migrated a=%s b=%s; rearmed a=%s b=%s: %s", i+1,
				e.Start.Format(stamp), rel(e.Start, e.MigratedA), rel(e.Start, e.MigratedB),
				rel(e.Start, e.RearmedA), rel(e.Start, e.RearmedB), e.Verdict))
		}
		for _, l := range p.LAPs {
			t.Sub = append(t.Sub, fmt.Sprintf("LAP %s -> %s: %s", l.From, l.To, l.Note))
		}
		v.Timelines = append(v.Timelines, t)
	}
	for i := range r.QPs {
		if q := &r.QPs[i]; !done[q.ID] {
			v.Timelines = append(v.Timelines, timeline(r, "qp "+q.ID, []*QP{q}))
		}
	}
	return htmlTmpl.Execute(w, v)
}

// timeline lays out one SVG: a swimlane per QP (per host for a pair), a
// time axis, a mark per event and per finding.
func timeline(r *Report, title string, qs []*QP) svgTimeline {
	t := svgTimeline{Title: title, Width: svgWidth, Height: axisH + laneH*len(qs) + 10}
	x, ticks := logScale(r, qs)
	t.Ticks = ticks
	for n, q := range qs {
		y := axisH + laneH*n + laneH/2
		t.Lanes = append(t.Lanes, svgLane{Y: y, X2: svgWidth - laneRight, Side: clip(q.Side, 28), QP: fmt.Sprintf("%s/%d", q.Device, q.QPN)})
		for _, e := range q.Entries {
			m := svgMark{X: x(e.Time), Y: y, Class: strings.ReplaceAll(e.Kind, "-", ""),
				Tip: fmt.Sprintf("%s %s %s: %s", e.Time.Format(stamp), q.Side, e.What, e.Detail)}
			switch e.Kind {
			case "qp-event", "port-event":
				m.Shape, m.Path = "path", fmt.Sprintf("M%d %d l6 10 h-12 z", m.X, y-5)
			case "mad", "cm-notify", "cm-handler":
				m.Shape = "rect"
			default:
				m.Shape = "circle"
			}
			if e.Fail {
				m.Class += " fail"
			}
			t.Marks = append(t.Marks, m)
		}
		for _, i := range q.Findings {
			f := r.Findings[i]
			fx := x(f.FirstTime)
			t.Marks = append(t.Marks, svgMark{X: fx, Y: y - 18, Shape: "path", Class: "finding",
				Path: fmt.Sprintf("M%d %d l7 7 l-7 7 l-7 -7 z", fx, y-25),
				Tip:  fmt.Sprintf("[%d] %s %s %s: %s", i, f.FirstTime.Format(stamp), f.Severity, f.Kind, f.Explanation)})
		}
	}
	return t
}

// logScale maps times to x so that every gap between two consecutive
// distinct times takes room growing with the logarithm of its length:
// bursts of microseconds and pauses of seconds both stay readable.
func logScale(r *Report, qs []*QP) (func(time.Time) int, []svgTick) {
	var ts []int64
	for _, q := range qs {
		for _, e := range q.Entries {
			ts = append(ts, e.Time.UnixNano())
		}
		for _, i := range q.Findings {
			ts = append(ts, r.Findings[i].FirstTime.UnixNano())
		}
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
	width := float64(svgWidth - laneLeft - laneRight)
	x := func(at time.Time) int {
		i, _ := slices.BinarySearch(ts, at.UnixNano())
		if i >= len(ts) {
			i = len(ts) - 1
		}
		if i < 0 {
			return laneLeft
		}
		return laneLeft + int(cum[i]/total*width)
	}
	var ticks []svgTick
	last := -1
	for k := 0; k <= 5 && len(ts) > 0; k++ {
		want := total * float64(k) / 5
		i, _ := slices.BinarySearchFunc(cum, want, func(c, w float64) int { return cmp.Compare(c, w) })
		i = min(i, len(ts)-1)
		if i == last {
			continue
		}
		last = i
		d := time.Duration(ts[i] - ts[0])
		ticks = append(ticks, svgTick{X: laneLeft + int(cum[i]/total*width), Label: "+" + d.Round(time.Microsecond).String()})
	}
	return x, ticks
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
