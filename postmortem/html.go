package postmortem

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"maps"
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
	Y, X2 int
	Name  string
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
	var lo, hi time.Time
	see := func(x time.Time) {
		if lo.IsZero() || x.Before(lo) {
			lo = x
		}
		if x.After(hi) {
			hi = x
		}
	}
	for _, q := range qs {
		for _, e := range q.Entries {
			see(e.Time)
		}
		for _, i := range q.Findings {
			see(r.Findings[i].FirstTime)
		}
	}
	span := hi.Sub(lo)
	if span <= 0 {
		span = time.Millisecond
	}
	x := func(at time.Time) int {
		return laneLeft + int(float64(at.Sub(lo))/float64(span)*float64(svgWidth-laneLeft-laneRight))
	}
	for i := 0; i <= 5; i++ {
		at := lo.Add(span * time.Duration(i) / 5)
		t.Ticks = append(t.Ticks, svgTick{X: x(at), Label: "+" + at.Sub(lo).Round(time.Microsecond).String()})
	}
	for n, q := range qs {
		y := axisH + laneH*n + laneH/2
		t.Lanes = append(t.Lanes, svgLane{Y: y, X2: svgWidth - laneRight, Name: q.Side + " " + q.Device + "/" + fmt.Sprint(q.QPN)})
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
