package output

import (
	"fmt"
	"io"
	"strings"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/columns"
	"github.com/apmwatch/apmwatch/internal/escape"
	"text/tabwriter"
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
// findings, and one line counting the hooks by how they attached
// (apmwatch probes lists them).
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
	// lost: the ring buffer was full; missed: the kernel skipped a probe
	// (another BPF program running on the CPU, a kprobe inside a kprobe,
	// no free kretprobe instance): both are events never recorded.
	fmt.Fprintf(w, "lost: %d%s, missed: %d, decode errors: %d, unjoined exits: %d\n", s.Lost, perCPU, s.Missed, s.DecodeErrs, s.Unjoined)
	printFindings(w, c)
	if line := ModelLine(c.Model); line != "" {
		fmt.Fprintln(w, line)
	}
	_, err := fmt.Fprintln(w, HooksLine(hooks)+" (apmwatch probes lists each)")
	return err
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

// HooksLine counts the hooks by how they attached.
func HooksLine(hooks []event.Hook) string {
	methods := map[event.HookMethod]int{}
	for _, h := range hooks {
		methods[h.Method]++
	}
	return fmt.Sprintf("hooks: %d fentry, %d kprobe, %d tracepoint, %d skipped, %d missing",
		methods[event.HookFentry], methods[event.HookKprobe], methods[event.HookTracepoint],
		methods[event.HookSkipped], methods[event.HookMissing])
}

// PrintHooks writes the hook table (apmwatch probes, trace --dry-run) to
// fit 80 columns: each hook, its module, how it attaches and why, the long
// names and reasons cut with an ellipsis (PrintHooksWide has them whole).
func PrintHooks(w io.Writer, hooks []event.Hook) error {
	t := columns.Table{Rows: [][]string{{"HOOK", "MODULE", "METHOD", "WHY"}},
		Cut: []columns.Cut{{Col: 3, Min: 24}, {Col: 1, Min: 9}, {Col: 0, Min: 26}, {Col: 3, Min: 8}, {Col: 0, Min: 8}}}
	for _, h := range hooks {
		t.Rows = append(t.Rows, []string{escape.Text(h.Name), escape.Text(h.Module), escape.Text(string(h.Method)), escape.Text(h.Reason)})
	}
	t.Fit(columns.Terminal, 0)
	if err := t.Write(w, ""); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, HooksLine(hooks))
	return err
}

// PrintHooksWide writes the hook table in full (-o wide): whether each
// hook is present, and the signal it carries.
func PrintHooksWide(w io.Writer, hooks []event.Hook) error {
	t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "HOOK\tMODULE\tPRESENT\tMETHOD\tSIGNAL\tWHY")
	for _, h := range hooks {
		present := "yes"
		if h.Method == event.HookMissing {
			present = "no"
		}
		sig := h.Signal
		if sig == "" {
			sig = "-"
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\n", escape.Text(h.Name), escape.Text(h.Module), present,
			escape.Text(string(h.Method)), escape.Text(sig), escape.Text(h.Reason))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, HooksLine(hooks))
	return err
}
