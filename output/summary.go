package output

import (
	"fmt"
	"io"
	"strings"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/olekukonko/tablewriter"
)

// Counts are the events a trace saw, by kind (before filtering) and shown,
// and the findings the model judged on them.
type Counts struct {
	ByKind map[event.Kind]uint64
	Shown  uint64

	NoModel       bool // the model did not run (--no-findings)
	Findings      map[apm.Kind]uint64
	FindingsShown uint64
	Resolved      uint64
	Remedy        map[apm.Kind]string // the remediation of the first finding of a kind
	Model         apm.Stats           // the model's counters at the end
}

// Add counts an event.
func (c *Counts) Add(e *event.Event, shown bool) {
	if c.ByKind == nil {
		c.ByKind = make(map[event.Kind]uint64)
	}
	c.ByKind[e.Kind]++
	if shown {
		c.Shown++
	}
}

// AddFinding counts a finding or a resolution.
func (c *Counts) AddFinding(f *apm.Finding, shown bool) {
	if c.Findings == nil {
		c.Findings, c.Remedy = make(map[apm.Kind]uint64), make(map[apm.Kind]string)
	}
	if shown {
		c.FindingsShown++
	}
	if f.Resolved {
		c.Resolved++
		return
	}
	c.Findings[f.Kind]++
	if _, ok := c.Remedy[f.Kind]; !ok {
		c.Remedy[f.Kind] = f.Remediation
	}
}

// PrintSummary writes the end-of-trace summary: events by kind, losses,
// and every hook with how it was attached.
func PrintSummary(w io.Writer, c Counts, s event.Stats, hooks []event.Hook) error {
	var kinds []string
	var total uint64
	for _, k := range event.Kinds() {
		if n := c.ByKind[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
			total += n
		}
	}
	if len(kinds) == 0 {
		kinds = []string{"none"}
	}
	fmt.Fprintf(w, "events: %d seen, %d shown: %s\n", total, c.Shown, strings.Join(kinds, " "))
	perCPU := ""
	if s.Lost > 0 {
		perCPU = fmt.Sprintf(" (per cpu %v)", s.LostPerCPU)
	}
	fmt.Fprintf(w, "lost: %d%s, decode errors: %d, unjoined exits: %d\n", s.Lost, perCPU, s.DecodeErrs, s.Unjoined)
	printFindings(w, c)
	if line := ModelLine(c.Model); line != "" {
		fmt.Fprintln(w, line)
	}
	return PrintHooks(w, hooks)
}

// ModelLine says what the model could not judge normally (inputs later than
// the reorder window, second copies of one event, events it could not tie to
// a QP, events dropped at the QP bound, new boots), or "" when nothing.
func ModelLine(s apm.Stats) string {
	if s.Late+s.Duplicates+s.Unattributed+s.Dropped+s.Reboots == 0 {
		return ""
	}
	return fmt.Sprintf("model: %d late (judged at their own time), %d duplicate QP events, %d unattributed, %d dropped at --max-qps, %d new boots",
		s.Late, s.Duplicates, s.Unattributed, s.Dropped, s.Reboots)
}

// printFindings writes the findings by kind and, per kind, what to do.
func printFindings(w io.Writer, c Counts) {
	if c.NoModel {
		fmt.Fprintln(w, "findings: not judged (--no-findings)")
		return
	}
	var kinds []string
	var total uint64
	for _, k := range apm.Kinds() {
		if n := c.Findings[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
			total += n
		}
	}
	if len(kinds) == 0 {
		kinds = []string{"none"}
	}
	fmt.Fprintf(w, "findings: %d (%d resolved; %d lines shown): %s\n", total, c.Resolved, c.FindingsShown, strings.Join(kinds, " "))
	for _, k := range apm.Kinds() {
		if c.Findings[k] > 0 {
			fmt.Fprintf(w, "  %s: %s\n", k, escape.Text(c.Remedy[k]))
		}
	}
}

// PrintHooks writes the hook table (apmwatch probes, trace --dry-run, summary).
func PrintHooks(w io.Writer, hooks []event.Hook) error {
	methods := map[event.HookMethod]int{}
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(0))
	t.Header([]string{"HOOK", "MODULE", "PRESENT", "METHOD", "WHY", "SIGNAL"})
	for _, h := range hooks {
		methods[h.Method]++
		present := "yes"
		if h.Method == event.HookMissing {
			present = "no"
		}
		if err := t.Append([]string{escape.Text(h.Name), escape.Text(h.Module), present, escape.Text(string(h.Method)),
			escape.Text(h.Reason), escape.Text(h.Signal)}); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "hooks: %d fentry, %d kprobe, %d tracepoint, %d skipped, %d missing\n",
		methods[event.HookFentry], methods[event.HookKprobe], methods[event.HookTracepoint],
		methods[event.HookSkipped], methods[event.HookMissing])
	return err
}
