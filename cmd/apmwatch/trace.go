package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/collector"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
	"github.com/apmwatch/apmwatch/session"
	"github.com/spf13/cobra"
)

func newTraceCmd() *cobra.Command {
	cfg := session.TraceConfig{Model: apm.DefaultConfig()}
	var filters filterFlags
	var opts collector.Options
	var verbose bool
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Stream APM events as they happen, with the findings they prove",
		Long: "Streams every QP modify (with its decoded paths and return code), QP and port event, CM notify and\n" +
			"LAP/APR handling, CM MAD and QP create and destroy as the kernel makes them, and runs the APM model\n" +
			"on them: its findings come inline (KIND FINDING or RESOLVED). Every --reconcile-interval rdma netlink\n" +
			"is read into the stream (qp-truth, shown with --kind qp-truth). -o table fits 80 columns (a line of\n" +
			"fixed columns, the event's text wrapped under it), -o wide is one row an event, -o json one object\n" +
			"a line (docs/events.md). On exit a summary on stderr: events and findings by kind, lost events, and\n" +
			"the hooks counted by how they attached (apmwatch probes lists them). Needs root, or CAP_BPF and\n" +
			"CAP_PERFMON.",
		Example: "  apmwatch trace\n" +
			"  apmwatch trace -o json --record f.rec\n" +
			"  apmwatch trace --device mlx5_0 --kind finding\n" +
			"  apmwatch trace --dry-run",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRing(opts.RingMiB); err != nil {
				return err
			}
			f, err := filters.filter()
			if err != nil {
				return err
			}
			if cfg.Output, err = outputFormat(cmd, cfg.Output); err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			cfg.Filter = f
			if verbose {
				opts.Log = cmd.ErrOrStderr()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return session.RunTrace(ctx, cfg, session.TraceDeps{
				Open:      func() (event.Source, error) { return collector.Open(opts) },
				Snapshot:  rdmanl.Read,
				Boot:      collector.Boot,
				Plan:      func() ([]event.Hook, error) { return collector.Plan(opts) },
				Check:     collector.Preflight,
				CheckRDMA: collector.CheckRDMA,
				Stdout:    cmd.OutOrStdout(),
				Stderr:    cmd.ErrOrStderr(),
			})
		},
	}
	fl := cmd.Flags()
	addWideOutputFlag(cmd, &cfg.Output, " (one object per line)")
	addFilterFlags(fl, &filters, filterFindings)
	completeFilterFlags(cmd, true, true)
	fl.DurationVar(&cfg.Duration, "duration", 0, "stop after this long (default: until interrupted)")
	fl.StringVar(&cfg.ReadyFile, "ready-file", "", "write this file (hooks as JSON) once every probe is attached")
	fl.BoolVar(&cfg.DryRun, "dry-run", false, "list the attach targets and methods, attach nothing")
	addAttachFlags(fl, &opts)
	addRingFlag(fl, &opts.RingMiB)
	fl.BoolVar(&opts.AllMADs, "all-mads", false, "every MAD class, not only CM")
	fl.BoolVar(&opts.ForceKprobe, "force-kprobe", false, "use kprobes and raw tracepoints only")
	fl.StringVar(&cfg.Record, "record", "", "also record every event and ground-truth reading (before filtering) to this file")
	fl.BoolVar(&cfg.NoFindings, "no-findings", false, "do not run the APM model: events only")
	fl.DurationVar(&cfg.Reconcile, "reconcile-interval", time.Second, "read every QP's state from rdma netlink this often into the stream (qp-truth; 0: never)")
	fl.BoolVarP(&verbose, "verbose", "v", false, "print fallback and verifier details to stderr")
	addModelFlags(fl, &cfg.Model)
	_ = fl.MarkHidden("force-kprobe")
	return cmd
}
