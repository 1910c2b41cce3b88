package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/apmwatch/apmwatch/internal/readyfile"
	"github.com/apmwatch/apmwatch/output"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// advanceEvery is how often the model's clock moves on while no event
// comes, so a deadline is judged within this much of falling due.
var advanceEvery = 100 * time.Millisecond

// TraceConfig is everything `apmwatch trace` takes from its flags.
type TraceConfig struct {
	Output     string // "table" or "json"
	Filter     output.Filter
	Duration   time.Duration // 0: until ctx is done
	ReadyFile  string        // written (Meta as JSON) once every probe is attached
	DryRun     bool          // list the targets, attach nothing
	Record     string        // also record every event and reading to this file
	Model      apm.Config    // the model's thresholds
	NoFindings bool          // do not run the model
	Reconcile  time.Duration // read rdma netlink this often into the stream; 0: never
}

// TraceDeps are the trace command's connections to the system.
type TraceDeps struct {
	Open      func() (event.Source, error)
	Snapshot  func() (rdmanl.Snapshot, error) // ground truth (rdmanl.Read)
	Boot      func() uint64                   // CLOCK_BOOTTIME now, for the model's deadlines
	Plan      func() ([]event.Hook, error)    // for --dry-run
	Check     func() error                    // privileges, RDMA present
	CheckRDMA func() error                    // for --dry-run
	Stdout    io.Writer
	Stderr    io.Writer // summary and warnings
}

// RunTrace streams events and the findings the model judges on them until
// ctx is done or the duration passes, then prints the summary.
func RunTrace(ctx context.Context, cfg TraceConfig, d TraceDeps) error {
	w, err := output.NewBuffered(cfg.Output, d.Stdout) // flushed by pump and Close
	if err != nil {
		return err
	}
	if cfg.DryRun {
		return dryRun(cfg, d)
	}
	if d.Check != nil {
		if err := d.Check(); err != nil {
			return err
		}
	}
	t := &tracer{cfg: cfg, w: w, boot: d.Boot, counts: output.Counts{NoModel: cfg.NoFindings}}
	if !cfg.NoFindings {
		if t.model, err = apm.New(cfg.Model, t.found); err != nil {
			return err
		}
	}
	src, err := Tee(cfg.Record, withTruth(seeing(d.Open), d.Snapshot, cfg.Reconcile, d.Stderr))()
	if err != nil {
		return err
	}
	defer src.Close()
	meta := src.Meta()
	w.SetHost(meta.Host)
	if cfg.ReadyFile != "" {
		if err := readyfile.Write(cfg.ReadyFile, meta); err != nil {
			return err
		}
	}
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	werr := t.pump(ctx, src, true)
	cerr := src.Close() // detach, then drain what is left
	if werr == nil {
		werr = t.pump(context.Background(), src, false)
	}
	if werr == nil {
		werr = t.finish()
	}
	if err := w.Close(); err != nil && werr == nil {
		werr = fmt.Errorf("writing output: %w", err)
	}
	if err := output.PrintSummary(d.Stderr, t.counts, src.Stats(), meta.Hooks); err != nil && werr == nil {
		werr = err
	}
	return errors.Join(werr, cerr)
}

// dryRun is `apmwatch probes`: the same plan, printed the same way (a
// JSON array with -o json).
func dryRun(cfg TraceConfig, d TraceDeps) error {
	return output.RunProbes(cfg.Output == "json", output.ProbesDeps{Plan: d.Plan, Check: d.CheckRDMA, Stdout: d.Stdout})
}

// seeing returns open refusing a blind source (event.Blind): a probe that
// cannot attach where the kernel has its hook is an error, never a trace
// that sees nothing and exits 0.
func seeing(open func() (event.Source, error)) func() (event.Source, error) {
	return func() (event.Source, error) {
		src, err := open()
		if err != nil {
			return nil, err
		}
		if err := event.BlindError(src.Meta().Hooks); err != nil {
			src.Close()
			return nil, err
		}
		return src, nil
	}
}

// withTruth returns open with ground-truth readings merged into its
// source every interval (none when every is 0 or snapshot nil).
func withTruth(open func() (event.Source, error), snapshot func() (rdmanl.Snapshot, error), every time.Duration, stderr io.Writer) func() (event.Source, error) {
	return func() (event.Source, error) {
		src, err := open()
		if err != nil {
			return nil, err
		}
		return rdmanl.Merge(src, rdmanl.MergeOptions{Every: every, Read: snapshot, Warn: func(err error) {
			if stderr != nil {
				fmt.Fprintf(stderr, "warning: %s\n", escape.Text(err.Error())) // may name devices
			}
		}}), nil
	}
}
