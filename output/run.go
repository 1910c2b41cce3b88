package output

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/escape"
)

// NewWriter returns the renderer for an --output value.
func NewWriter(format string, w io.Writer) (Writer, error) {
	switch format {
	case "table", "":
		return NewTableWriter(w), nil
	case "json":
		return NewJSONWriter(w), nil
	}
	return nil, fmt.Errorf("bad --output %q: want table or json", format)
}

// ProbesDeps are the probes command's connections to the system.
type ProbesDeps struct {
	Plan   func() ([]event.Hook, error)
	Check  func() error // RDMA present
	Stdout io.Writer
}

// RunProbes prints every hook, whether this kernel has it and how it would
// be attached; with asJSON, one JSON array.
func RunProbes(asJSON bool, d ProbesDeps) error {
	if d.Check != nil {
		if err := d.Check(); err != nil {
			return err
		}
	}
	hooks, err := d.Plan()
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(d.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(escape.Value(hooks)) // --event-hook names come from the command line
	}
	return PrintHooks(d.Stdout, hooks)
}
