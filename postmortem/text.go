package postmortem

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apmwatch/apmwatch/internal/columns"
	"github.com/apmwatch/apmwatch/internal/escape"
)

const stamp = "15:04:05.000000"

// WriteJSON writes the report as one indented JSON document. Strings from
// the recordings are escaped (internal/escape): the document is valid UTF-8
// and escape.Unescape gives back the recorded bytes. The lists are written
// one element at a time, so a large report is never held whole as JSON.
func WriteJSON(w io.Writer, r *Report) error {
	bw := bufio.NewWriter(w)
	ew := &errWriter{w: bw}
	ew.f("{\n")
	jsonValue(ew, "schema", r.Schema)
	jsonList(ew, "recordings", r.Recordings)
	jsonValue(ew, "summary", r.Summary)
	jsonList(ew, "clocks", r.Clocks)
	jsonList(ew, "findings", r.Findings)
	jsonList(ew, "qps", r.QPs)
	jsonList(ew, "pairs", r.Pairs)
	jsonList(ew, "unpaired", r.Unpaired)
	ew.f("\n}\n")
	if ew.err != nil {
		return ew.err
	}
	return bw.Flush()
}

// jsonValue and jsonList write one field of the report as
// json.MarshalIndent(report, "", "  ") would (a comma before every field
// but the first), a list one element at a time.
func jsonValue(w *errWriter, name string, v any) {
	jsonName(w, name)
	w.marshal(v, "  ")
}

func jsonList[T any](w *errWriter, name string, list []T) {
	jsonName(w, name)
	switch {
	case len(list) == 0: // an empty list is [], never null: jq '.findings[]' works
		w.f("[]")
	default:
		w.f("[")
		for i := range list {
			if i > 0 {
				w.f(",")
			}
			w.f("\n    ")
			w.marshal(list[i], "    ")
		}
		w.f("\n  ]")
	}
}

func jsonName(w *errWriter, name string) {
	if name != "schema" { // the first field
		w.f(",\n")
	}
	w.f("  %q: ", name)
}

// marshal writes v, its strings escaped, indented under prefix.
func (e *errWriter) marshal(v any, prefix string) {
	b, err := json.MarshalIndent(escape.Value(v), prefix, "  ")
	if err != nil && e.err == nil {
		e.err = err
	}
	e.Write(b)
}

// escaped is a copy of the report with every string escaped, for the
// outputs: host and process names in a recording are data, never terminal
// (or page) control. The report itself keeps the recorded bytes.
func escaped(r *Report) *Report {
	e := escape.Value(*r)
	return &e
}

// WriteText writes the report for people: summary, clocks, findings, then
// the pair timelines and the timelines of unpaired QPs, each timeline a
// table that fits 80 columns (long QP names and details cut with an
// ellipsis).
func WriteText(w io.Writer, r *Report) error { return writeText(w, r, false) }

// WriteTextWide is WriteText with the timelines in full (-o wide).
func WriteTextWide(w io.Writer, r *Report) error { return writeText(w, r, true) }

func writeText(w io.Writer, r *Report, wide bool) error {
	r = escaped(r)
	ew := &errWriter{w: w}
	writeSummary(ew, r)
	writeFindings(ew, r)
	writeUnpaired(ew, r)
	shown := map[string]bool{}
	byID := map[string]*QP{}
	for i := range r.QPs {
		byID[r.QPs[i].ID] = &r.QPs[i]
	}
	for _, p := range r.Pairs {
		a, b := byID[p.A], byID[p.B]
		if a == nil || b == nil {
			continue
		}
		shown[a.ID], shown[b.ID] = true, true
		writePair(ew, p, a, b, wide)
	}
	for i := range r.QPs {
		if q := &r.QPs[i]; !shown[q.ID] {
			writeQP(ew, q, wide)
		}
	}
	return ew.err
}

// writeUnpaired lists the QPs whose QPNs point at each other but whose
// identity the recordings do not confirm: no two-sided finding is judged
// on them.
func writeUnpaired(w *errWriter, r *Report) {
	if r.Summary.Unpaired == 0 {
		return
	}
	w.f("\nunpaired: %d QP(s) whose QPNs point at each other are not taken for one connection (no two-sided finding judged)\n", r.Summary.Unpaired)
	for _, u := range r.Unpaired {
		w.f("  %s <-> %s: unpaired: %s\n", u.A, u.B, u.Why)
	}
	if n := r.Summary.Unpaired - len(r.Unpaired); n > 0 {
		w.f("  (%d more not listed)\n", n)
	}
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) f(format string, a ...any) { fmt.Fprintf(e, format, a...) }

func writeSummary(w *errWriter, r *Report) {
	s := r.Summary
	w.f("recordings: %d\n", s.Recordings)
	for _, rec := range r.Recordings {
		w.f("  %s: host \"%s\" kernel %s apmwatch %s, %d file(s) %d bytes, %d events", rec.Side, rec.Host,
			rec.Kernel, rec.Version, len(rec.Files), rec.Bytes, rec.Events)
		if !rec.Start.IsZero() {
			w.f(", %s to %s", rec.Start.Format(time.RFC3339Nano), rec.End.Format(stamp))
		}
		w.f("\n    lost %d, missed %d, decode errors %d, unjoined %d", rec.Stats.Lost, rec.Stats.Missed, rec.Stats.DecodeErrs, rec.Stats.Unjoined)
		if len(rec.MissingHooks) > 0 {
			w.f("; hooks missing: %s", strings.Join(rec.MissingHooks, ", "))
		}
		if m := rec.Model; m != nil {
			w.f("\n    model: %d late (judged at their own time), %d duplicate QP events, %d unattributed, %d dropped at --max-qps, %d new boots",
				m.Late, m.Duplicates, m.Unattributed, m.Dropped, m.Reboots)
		}
		w.f("\n")
	}
	for _, c := range r.Clocks {
		w.f("clock %s <-> %s: %s", c.A, c.B, c.Note)
		if c.Shift != 0 {
			w.f("; %s shifted by %v", c.B, c.Shift)
		}
		w.f("\n")
	}
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(s.Findings)) {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, s.Findings[k]))
	}
	if len(kinds) == 0 {
		kinds = []string{"none"}
	}
	w.f("summary: %d events, %d lost; %d QPs, %d migrations, %d pairs; findings: %s (%d resolved); %d warnings\n",
		s.Events, s.Lost, s.QPs, s.Migrations, s.Pairs, strings.Join(kinds, " "), s.Resolved, s.Warnings)
	if s.Lost > 0 {
		w.f("note: the probes lost %d events while recording: findings may be missing or wrong\n", s.Lost)
	}
	if s.DroppedQPs+s.DroppedTimeline+s.DroppedFindings+s.DroppedSteps > 0 {
		w.f("note: bounds left out %d events of QPs beyond --max-qps, %d timeline entries, %d findings, %d migrations and rearms (docs/postmortem.md, \"Bounds\")\n",
			s.DroppedQPs, s.DroppedTimeline, s.DroppedFindings, s.DroppedSteps)
	}
}

func writeFindings(w *errWriter, r *Report) {
	w.f("\nfindings: %d shown\n", len(r.Findings))
	for i, f := range r.Findings {
		w.f("[%d] %s %s %s %s %s/%d#%d", i, f.FirstTime.Format(stamp), f.Severity, f.Kind, f.Side, f.QP.Device, f.QP.QPN, f.QP.Gen)
		if f.Comm != "" {
			w.f(" (%s:%d)", f.Comm, f.PID)
		}
		w.f("\n    %s\n", f.Explanation)
		for _, e := range f.Evidence {
			w.f("    evidence: %s\n", e.What)
		}
		if res := f.Resolution; res != nil {
			w.f("    resolved at %s", res.LastTime.Format(stamp))
			if res.Unprotected > 0 {
				w.f(" (unprotected for %v)", res.Unprotected)
			}
			w.f("\n")
		}
		w.f("    fix: %s\n", f.Remediation)
	}
}

func writePair(w *errWriter, p Pair, a, b *QP, wide bool) {
	w.f("\npair: %s <-> %s\n", a.ID, b.ID)
	w.f("  a: %s  dest qpn %d  primary %s  alt %s\n", a.ID, a.DestQPN, pathText(a.Primary), pathText(a.Alt))
	w.f("  b: %s  dest qpn %d  primary %s  alt %s\n", b.ID, b.DestQPN, pathText(b.Primary), pathText(b.Alt))
	for i, e := range p.Episodes {
		w.f("  episode %d at %s: migrated a=%s b=%s; rearmed a=%s b=%s: %s\n", i+1, e.Start.Format(stamp),
			rel(e.Start, e.MigratedA), rel(e.Start, e.MigratedB), rel(e.Start, e.RearmedA), rel(e.Start, e.RearmedB), e.Verdict)
	}
	for _, l := range p.LAPs {
		w.f("  LAP %s -> %s tid 0x%x: %s\n", l.From, l.To, l.TID, l.Note)
	}
	type row struct {
		t    time.Time
		side int
		e    Entry
	}
	var rows []row
	for side, q := range []*QP{a, b} {
		for _, e := range q.Entries {
			rows = append(rows, row{e.Time, side, e})
		}
	}
	slices.SortStableFunc(rows, func(x, y row) int { return x.t.Compare(y.t) })
	if !wide {
		t := columns.Table{Rows: [][]string{{"TIME", "a: " + a.ID, "b: " + b.ID}},
			Cut: []columns.Cut{{Col: 1, Min: 36}, {Col: 2, Min: 36}, {Col: 1, Min: 30}, {Col: 2, Min: 30},
				{Col: 1, Min: 24}, {Col: 2, Min: 24}, {Col: 1, Min: 12}, {Col: 2, Min: 12}}}
		for _, r := range rows {
			cols := []string{r.t.Format(stamp), "", ""}
			cols[1+r.side] = mark(r.e)
			t.Rows = append(t.Rows, cols)
		}
		t.Fit(columns.Terminal, 2)
		t.Write(w, "  ")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  TIME\ta: %s\tb: %s\n", a.ID, b.ID)
	for _, r := range rows {
		cols := [2]string{"", ""}
		cols[r.side] = mark(r.e)
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.t.Format(stamp), cols[0], cols[1])
	}
	tw.Flush()
}

func writeQP(w *errWriter, q *QP, wide bool) {
	w.f("\nqp: %s", q.ID)
	if q.Comm != "" {
		w.f(" (%s:%d)", q.Comm, q.PID)
	}
	w.f("  dest qpn %d  primary %s  alt %s  migrations %d  rearms %d\n", q.DestQPN, pathText(q.Primary), pathText(q.Alt), q.Migrations, q.Rearms)
	if wide {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, e := range q.Entries {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.Time.Format(stamp), mark(e), e.Detail)
		}
		tw.Flush()
	} else {
		t := columns.Table{Cut: []columns.Cut{{Col: 2, Min: 20}, {Col: 1, Min: 14}, {Col: 2, Min: 8}}}
		for _, e := range q.Entries {
			t.Rows = append(t.Rows, []string{e.Time.Format(stamp), mark(e), e.Detail})
		}
		t.Fit(columns.Terminal, 2)
		t.Write(w, "  ")
	}
	if q.Dropped > 0 {
		w.f("  (%d later events not kept: raise --max-entries)\n", q.Dropped)
	}
}

func mark(e Entry) string {
	if e.Fail {
		return e.What + " (failed)"
	}
	return e.What
}

func rel(start time.Time, t *time.Time) string {
	if t == nil {
		return "no"
	}
	return "+" + t.Sub(start).String()
}
