package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/apmwatch/apmwatch/collector"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
	"github.com/apmwatch/apmwatch/session"
	"github.com/spf13/cobra"
)

func newRecordCmd() *cobra.Command {
	var cfg session.Config
	var filters filterFlags
	var opts collector.Options
	cmd := &cobra.Command{
		Use:   "record -w FILE",
		Short: "Record the events to a crash-safe file for apmwatch postmortem",
		Long: "Records what the probes see to a crash-safe file (docs/recording.md) for apmwatch postmortem:\n" +
			"the events the filters keep and, every --reconcile-interval, rdma netlink's reading of every QP.\n" +
			"With --rotate-size it is a flight recorder (FILE.000000, ...). While recording, the probes'\n" +
			"counters are written every second, so a file cut by kill -9 still says how many events were lost.",
		Example: "  apmwatch record -w /var/tmp/apm.rec\n" +
			"  apmwatch record -w apm.rec --device mlx5_0 --duration 1h\n" +
			"  apmwatch record -w apm.rec --rotate-size 100000000 --rotate-keep 10",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRing(opts.RingMiB); err != nil {
				return err
			}
			if cfg.Path == "" {
				return usageError{errors.New("no recording file: give -w FILE")}
			}
			f, err := filters.filter()
			if err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			cfg.Filter = f
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, err = session.Record(ctx, cfg, session.Deps{
				Open:     func() (event.Source, error) { return collector.Open(opts) },
				Snapshot: rdmanl.Read,
				Check:    collector.Preflight,
				Stderr:   cmd.ErrOrStderr(),
			})
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&cfg.Path, "write", "w", "", "the recording file (with --rotate-size: the prefix of FILE.000000, ...)")
	// The old spelling: -o names a format everywhere else.
	fl.StringVarP(&cfg.Path, "output", "o", "", "the recording file")
	deprecatedAlias(cmd, "output", "use -w/--write FILE")
	addFilterFlags(fl, &filters, filterEvents)
	completeFilterFlags(cmd, true, false)
	fl.DurationVar(&cfg.Reconcile, "reconcile-interval", time.Second, "record every QP's state from rdma netlink this often (qp-truth; 0: never)")
	fl.DurationVar(&cfg.Duration, "duration", 0, "stop after this long (default: until interrupted)")
	fl.StringVar(&cfg.ReadyFile, "ready-file", "", "write this file (hooks as JSON) once recording has started")
	fl.BoolVar(&cfg.Options.Compress, "compress", false, "compress with zstd (a cut loses at most one block)")
	fl.Int64Var(&cfg.Options.MaxBytes, "rotate-size", 0, "start a new file at this many bytes")
	fl.IntVar(&cfg.Options.MaxFiles, "rotate-keep", 0, "with --rotate-size: keep only the newest N files")
	addAttachFlags(fl, &opts)
	addRingFlag(fl, &opts.RingMiB)
	fl.BoolVar(&opts.AllMADs, "all-mads", false, "every MAD class, not only CM")
	return cmd
}
