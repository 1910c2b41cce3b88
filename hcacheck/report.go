package hcacheck

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/apmwatch/apmwatch/internal/columns"
	"github.com/apmwatch/apmwatch/internal/escape"
)

// The points, in the order they are driven.
const (
	PtArmedModify  = "armed-modify"             // PATH_MIG_STATE=ARMED on a QP that is not ARMED
	PtRearmOnArmed = "rearm-on-armed"           // REARM on an ARMED QP
	PtForcedEvent  = "forced-event"             // PATH_MIG at the side forcing a migration, and when
	PtResponderEv  = "responder-event"          // PATH_MIG at the peer once traffic flowed
	PtAltAfterMig  = "alt-after-migration"      // the alternate a query reads after a migration
	PtMigFromRearm = "migrated-from-rearm"      // MIGRATED on a QP in REARM
	PtCommEstAfter = "comm-est-after-migration" // COMM_EST on either QP after the migration
	PtOneWayArm    = "one-way-arm"              // both rearmed, only A sends: who reads ARMED
	PtDeadAlt      = "dead-alternate"           // retries exhausted with a dead alternate
	PtUnloadedAlt  = "unloaded-alt-port"        // the alternate port a query reads before any was loaded
)

// Point is one firmware-decided point and the answer the device gave.
type Point struct {
	Point  string `json:"point"`
	Answer string `json:"answer"`
	Errno  string `json:"errno,omitempty"`  // of the modify the point is about ("0": it succeeded)
	Event  string `json:"event,omitempty"`  // the async events seen, "QP:EVENT" in order
	Detail string `json:"detail,omitempty"` // what was read (QUERY_QP, completions) and why the answer
}

// Report is the whole answer.
type Report struct {
	Device  string            `json:"device"`
	Port    uint8             `json:"port"`
	AltPort uint8             `json:"alt_port"`
	Driver  string            `json:"driver,omitempty"`
	QPN     map[string]uint32 `json:"qpn,omitempty"` // A and B
	Points  []Point           `json:"points"`
	// Knobs maps the answers onto the lab HCA's knob names (lab-ib knob):
	// a point whose answer is no value of its knob is left out.
	Knobs map[string]string `json:"knobs"`
	Notes []string          `json:"notes,omitempty"`
}

// Write prints the report: one JSON document, or a table that fits 80
// columns, the knob line and the notes. Every string from the host is
// escaped.
func (r *Report) Write(w io.Writer, asJSON bool) error { return r.write(w, asJSON, false) }

// WriteWide prints the report with its table in full, a point a row (-o
// wide).
func (r *Report) WriteWide(w io.Writer) error { return r.write(w, false, true) }

// writeLines writes the points for 80 columns: a line of the point, the
// answer, the errno and the events (cut with an ellipsis when long), the
// detail wrapped under it.
func (r *Report) writeLines(w io.Writer) error {
	t := columns.Table{Rows: [][]string{{"POINT", "ANSWER", "ERRNO", "EVENTS"}},
		Cut: []columns.Cut{{Col: 3, Min: 16}, {Col: 1, Min: 12}, {Col: 3, Min: 8}}}
	for _, p := range r.Points {
		t.Rows = append(t.Rows, []string{p.Point, escape.Text(p.Answer), escape.Text(p.Errno), escape.Text(p.Event)})
	}
	t.Fit(columns.Terminal, 0)
	var b strings.Builder
	for i, l := range t.Lines() {
		b.WriteString(l + "\n")
		if i == 0 {
			b.WriteString("    DETAIL\n")
			continue
		}
		for _, d := range columns.Wrap(escape.Text(r.Points[i-1].Detail), columns.Terminal-4) {
			b.WriteString("    " + d + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) write(w io.Writer, asJSON, wide bool) error {
	if r.Knobs == nil {
		r.Knobs = map[string]string{}
	}
	if r.Points == nil {
		r.Points = []Point{}
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(escape.Value(*r))
	}
	qps := ""
	if len(r.QPN) > 0 {
		qps = fmt.Sprintf(", QP A %d, QP B %d", r.QPN["A"], r.QPN["B"])
	}
	drv := r.Driver
	if drv == "" {
		drv = "no parent device"
	}
	if _, err := fmt.Fprintf(w, "%s (%s): primary port %d, alternate port %d%s\n",
		escape.Text(r.Device), escape.Text(drv), r.Port, r.AltPort, qps); err != nil {
		return err
	}
	if wide {
		// plain aligned columns, each cell whole (the long detail last)
		t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(t, "POINT\tANSWER\tERRNO\tEVENTS\tDETAIL")
		for _, p := range r.Points {
			fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\n", p.Point, dash(escape.Text(p.Answer)), dash(escape.Text(p.Errno)),
				dash(escape.Text(p.Event)), escape.Text(p.Detail))
		}
		if err := t.Flush(); err != nil {
			return err
		}
	} else if err := r.writeLines(w); err != nil {
		return err
	}
	names := make([]string, 0, len(r.Knobs))
	for k := range r.Knobs {
		names = append(names, k)
	}
	sort.Strings(names)
	kv := make([]string, len(names))
	for i, k := range names {
		kv[i] = k + "=" + escape.Text(r.Knobs[k])
	}
	if len(kv) == 0 {
		kv = []string{"none decided"}
	}
	if _, err := fmt.Fprintf(w, "lab knobs: %s\n", strings.Join(kv, " ")); err != nil {
		return err
	}
	for _, n := range r.Notes {
		if _, err := fmt.Fprintf(w, "note: %s\n", escape.Text(n)); err != nil {
			return err
		}
	}
	return nil
}

// dash stands for an empty cell in plain columns, so the columns stay
// readable.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
