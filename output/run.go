package output

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/escape"
)

// NewWriter returns the renderer for an --output value: table (80
// columns), wide (the table in full) or json.
func NewWriter(format string, w io.Writer) (Writer, error) {
	switch format {
	case "table", "":
		return NewLineWriter(w), nil
	case "wide":
		return NewTableWriter(w), nil
	case "json":
		return NewJSONWriter(w), nil
	}
	return nil, fmt.Errorf("bad --output %q: want table, wide or json", format)
}

// ProbesDeps are the probes command's connections to the system.
type ProbesDeps struct {
	Plan func() ([]event.Hook, error)
	// Verify loads every planned hook's programs without attaching them
	// (nil: plan only). When it fails for want of privileges (Unprivileged
	// says so), the plan is printed as planned, not verified.
	Verify       func() ([]event.Hook, error)
	Unprivileged func(error) bool
	Check        func() error // RDMA present
	Stdout       io.Writer
	Stderr       io.Writer // the "planned, not verified" note (nil: Stdout)
	Wide         bool      // the table in full (-o wide), not cut to 80 columns
}

// RunProbes prints every hook, whether this kernel has it and how it would
// be attached; with asJSON, one JSON array. With Verify it says only what
// loads; without the privileges to load, it says the plan is unverified.
func RunProbes(asJSON bool, d ProbesDeps) error {
	if d.Check != nil {
		if err := d.Check(); err != nil {
			return err
		}
	}
	var (
		hooks []event.Hook
		err   error
		note  string
	)
	if d.Verify != nil {
		hooks, err = d.Verify()
		if err != nil && d.Unprivileged != nil && d.Unprivileged(err) {
			note = "planned, not verified: " + err.Error()
			hooks, err = d.Plan()
		}
	} else {
		hooks, err = d.Plan()
	}
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(d.Stdout)
		enc.SetIndent("", "  ")
		// A bare array, as it always was: checks outside apmwatch read
		// it so. Empty is [], never null.
		if err := enc.Encode(escape.Value(append([]event.Hook{}, hooks...))); err != nil { // --event-hook names come from the command line
			return err
		}
	} else {
		table := PrintHooks
		if d.Wide {
			table = PrintHooksWide
		}
		if err := table(d.Stdout, hooks); err != nil {
			return err
		}
	}
	switch {
	case note != "":
		w := d.Stderr
		if w == nil {
			w = d.Stdout
		}
		_, err = fmt.Fprintln(w, note)
	case d.Verify != nil && !asJSON:
		_, err = fmt.Fprintln(d.Stdout, "verified: every hook listed as attachable loaded on this kernel (nothing attached)")
	}
	return err
}
