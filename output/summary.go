package output

import (
	"fmt"
	"io"
	"strings"

	"github.com/apmwatch/apmwatch/event"
	"github.com/olekukonko/tablewriter"
)

// Counts are the events a trace saw, by kind (before filtering) and shown.
type Counts struct {
	ByKind map[event.Kind]uint64
	Shown  uint64
}

func (c *Counts) add(e *event.Event, shown bool) {
	if c.ByKind == nil {
		c.ByKind = make(map[event.Kind]uint64)
	}
	c.ByKind[e.Kind]++
	if shown {
		c.Shown++
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
	return PrintHooks(w, hooks)
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
		if err := t.Append([]string{h.Name, h.Module, present, string(h.Method), h.Reason, h.Signal}); err != nil {
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
