package output

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// TraceConfig is everything `apmwatch trace` takes from its flags.
type TraceConfig struct {
	Output    string // "table" or "json"
	Filter    Filter
	Duration  time.Duration // 0: until ctx is done
	ReadyFile string        // written (Meta as JSON) once every probe is attached
	DryRun    bool          // list the targets, attach nothing
}

// TraceDeps are the trace command's connections to the system.
type TraceDeps struct {
	Open      func() (event.Source, error)
	Plan      func() ([]event.Hook, error) // for --dry-run
	Check     func() error                 // privileges, RDMA present
	CheckRDMA func() error                 // for --dry-run
	Stdout    io.Writer
	Stderr    io.Writer // summary
}

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

// RunTrace streams events from the source until ctx is done or the
// duration passes, then prints the summary.
func RunTrace(ctx context.Context, cfg TraceConfig, d TraceDeps) error {
	w, err := NewWriter(cfg.Output, d.Stdout)
	if err != nil {
		return err
	}
	if cfg.DryRun {
		if d.CheckRDMA != nil {
			if err := d.CheckRDMA(); err != nil {
				return err
			}
		}
		hooks, err := d.Plan()
		if err != nil {
			return err
		}
		return PrintHooks(d.Stdout, hooks)
	}
	if d.Check != nil {
		if err := d.Check(); err != nil {
			return err
		}
	}
	src, err := d.Open()
	if err != nil {
		return err
	}
	defer src.Close()
	meta := src.Meta()
	if cfg.ReadyFile != "" {
		if err := writeReady(cfg.ReadyFile, meta); err != nil {
			return err
		}
	}
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	var counts Counts
	werr := pump(ctx, src, cfg.Filter, w, &counts)
	src.Close() // detach, then drain what is left
	if werr == nil {
		werr = pump(context.Background(), src, cfg.Filter, w, &counts)
	}
	if err := w.Close(); err != nil && werr == nil {
		werr = err
	}
	if err := PrintSummary(d.Stderr, counts, src.Stats(), meta.Hooks); err != nil && werr == nil {
		werr = err
	}
	return werr
}

// pump copies events until the source ends or ctx is done (both normal ends).
func pump(ctx context.Context, src event.Source, f Filter, w Writer, counts *Counts) error {
	for {
		e, err := src.Next(ctx)
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return nil
		case err != nil:
			return err
		}
		keep := f.Match(e)
		counts.add(e, keep)
		if keep {
			if err := w.Write(e); err != nil {
				return fmt.Errorf("writing output: %w", err)
			}
		}
	}
}

func writeReady(path string, meta event.Meta) error {
	b, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the ready file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the ready file: %w", err)
	}
	return nil
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
		return enc.Encode(hooks)
	}
	return PrintHooks(d.Stdout, hooks)
}
