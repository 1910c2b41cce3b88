package main

import (
	"time"

	"github.com/apmwatch/apmwatch/audit"
	"github.com/apmwatch/apmwatch/collector"
	"github.com/apmwatch/apmwatch/event"
	"github.com/spf13/cobra"
)

func newAuditCmd() *cobra.Command {
	cfg := audit.DefaultConfig()
	var opts collector.Options
	var pub publishFlags
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Run as a daemon: findings, metrics, flight recorder, incidents",
		Long: "The continuous audit: runs the probes and the APM model, appends each finding and resolution as a\n" +
			"JSON line to --findings (without it, to standard output), serves Prometheus metrics at\n" +
			"--metrics-addr, keeps a flight recorder and an incident bundle per finding under --recorder-dir,\n" +
			"reads rdma netlink every --reconcile-interval, and attaches the probes again when RDMA modules are\n" +
			"loaded or reloaded. With --policy it acts on missed rearms (monitor only without --enforce); with\n" +
			"--publish it sends its finding lines and connection records to NATS JetStream for apmwatch fleet.\n" +
			"See docs/audit.md and docs/fleet.md.",
		Example: "  apmwatch audit --findings /var/log/apmwatch/findings.jsonl \\\n      --recorder-dir /var/lib/apmwatch\n" +
			"  apmwatch audit --stdout --metrics-addr 127.0.0.1:9578\n" +
			"  apmwatch audit --recorder-dir /var/lib/apmwatch \\\n      --policy /etc/apmwatch/policy.json --enforce\n" +
			"  apmwatch audit --recorder-dir /var/lib/apmwatch --publish nats://fleet:4222",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRing(opts.RingMiB); err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			p, err := pub.start(cfg, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if p != nil {
				cfg.Sink = p
				defer p.Close(5 * time.Second)
			}
			return audit.Main(cmd.Context(), cfg, audit.Deps{
				Open:   func() (event.Source, error) { return collector.Open(opts) },
				Check:  collector.Preflight,
				Stdout: cmd.OutOrStdout(),
				Stderr: cmd.ErrOrStderr(),
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.Findings, "findings", "", "append findings as JSON lines to this file (SIGHUP reopens it)")
	fl.BoolVar(&cfg.Stdout, "stdout", false, "also write the finding lines to standard output (always without --findings)")
	fl.StringVar(&cfg.MetricsAddr, "metrics-addr", cfg.MetricsAddr, "serve Prometheus metrics at http://ADDR/metrics (\"\": off)")
	fl.BoolVar(&cfg.Profiles, "pprof", false, "also serve Go runtime profiles at http://ADDR/debug/pprof/ (loopback --metrics-addr only; for diagnosis)")
	fl.StringVar(&cfg.WebConfig, "web.config.file", "", "serve the metrics with TLS and/or basic auth as this Prometheus web configuration file says (\"\": plain HTTP)")
	fl.StringVar(&cfg.RecorderDir, "recorder-dir", "", "keep the flight recorder and incident bundles here (\"\": off)")
	fl.DurationVar(&cfg.RecorderMaxAge, "recorder-max-age", cfg.RecorderMaxAge, "keep this much recent history in the flight recorder")
	fl.Int64Var(&cfg.RecorderMaxBytes, "recorder-max-bytes", cfg.RecorderMaxBytes, "and at most this many bytes")
	fl.DurationVar(&cfg.BundleBefore, "bundle-before", cfg.BundleBefore, "an incident bundle holds the events from this long before its finding")
	fl.DurationVar(&cfg.BundleAfter, "bundle-after", cfg.BundleAfter, "and is written this long after it")
	fl.IntVar(&cfg.MaxBundles, "max-bundles", cfg.MaxBundles, "keep the newest N incident bundles")
	fl.DurationVar(&cfg.ReconcileInterval, "reconcile-interval", cfg.ReconcileInterval, "read every QP's state from rdma netlink this often into the stream (qp-truth; 0: never)")
	fl.StringVar(&cfg.ReadyFile, "ready-file", "", "write this file (hooks as JSON) once the probes are attached")
	fl.BoolVar(&cfg.NoRestore, "no-restore", false, "start afresh: do not rebuild what earlier runs of this boot left open from the flight recorder and the finding log")
	addAttachFlags(fl, &opts)
	addRingFlag(fl, &opts.RingMiB)
	fl.BoolVar(&opts.ForceKprobe, "force-kprobe", false, "use kprobes and raw tracepoints only")
	fl.StringVar(&cfg.Device, "device", "", "watch only this RDMA device (events and rdma netlink rows of others are dropped)")
	_ = cmd.RegisterFlagCompletionFunc("device", completeDevices)
	fl.StringVar(&cfg.Host, "host", "", "the host name to report as (default: the system's)")
	pub.add(fl)
	addModelFlags(fl, &cfg.Model)
	_ = fl.MarkHidden("force-kprobe")
	enforceAudit(cmd, &cfg)
	return cmd
}
