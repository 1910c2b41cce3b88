package main

import (
	"encoding/json"
	"fmt"
	"github.com/apmwatch/apmwatch/apm"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/apmwatch/apmwatch/fleet"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/natsserver"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/apmwatch/apmwatch/internal/outfile"
	"github.com/spf13/cobra"
)

func newFleetCmd() *cobra.Command {
	cfg := fleet.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Pair both ends of every connection over NATS and judge them live",
		Long: "Consumes the connection records the hosts' apmwatch audit --publish sends to NATS JetStream\n" +
			"(without --nats: an embedded NATS with JetStream listening on --listen, its streams in --store),\n" +
			"pairs both ends of every connection, and judges one-sided-rearm and unprotected-connection with\n" +
			"both hosts' evidence: finding lines on standard output or --findings, and back to the stream.\n" +
			"Instances share the partitions (--instance of --instances); one takes over the share\n" +
			"of an instance that stops, until it returns (--lease-ttl). See docs/fleet.md.",
		Example: "  apmwatch fleet --store /var/lib/apmwatch/fleet\n" +
			"  apmwatch fleet --listen 0.0.0.0:4222 --auth /etc/apmwatch/fleet-auth.conf \\\n      --tls-cert server.pem --tls-key server-key.pem\n" +
			"  apmwatch fleet --nats nats://nats1:4222,nats://nats2:4222 \\\n      --instance 0 --instances 2",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.NATS.URL != "" {
				if err := checkNATSURL("--nats", cfg.NATS.URL); err != nil {
					return usageError{err}
				}
			} else if cfg.StoreDir == "" {
				cfg.StoreDir = defaultStore()
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			if err := cfg.Engine.Validate(); err != nil {
				return usageError{err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			hup := make(chan os.Signal, 1) // reload --auth (never the default: exit)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			cfg.Reload = hup
			return fleet.Run(ctx, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.NATS.URL, "nats", "", "consume from this NATS (nats://host:4222); none: serve an embedded NATS with JetStream")
	fl.StringVar(&cfg.Listen, "listen", cfg.Listen, "the embedded NATS listens here")
	fl.StringVar(&cfg.StoreDir, "store", "", "the embedded NATS keeps its streams here (default /var/lib/apmwatch/fleet as root, else ~/.local/state/apmwatch/fleet)")
	fl.StringVar(&cfg.ReadyFile, "ready-file", "", "write this file (JSON) once the instance consumes")
	fl.StringVar(&cfg.Findings, "findings", "", "append finding lines to this file")
	fl.BoolVar(&cfg.Stdout, "stdout", false, "also write the finding lines to standard output (always without --findings)")
	fl.StringVar(&cfg.MetricsAddr, "metrics-addr", cfg.MetricsAddr, "serve Prometheus metrics at http://ADDR/metrics (\"\": off)")
	fl.BoolVar(&cfg.Profiles, "pprof", false, "also serve Go runtime profiles at http://ADDR/debug/pprof/ (loopback --metrics-addr only; for diagnosis)")
	fl.IntVar(&cfg.Instance, "instance", 0, "this instance's index among --instances (they split the partitions)")
	fl.IntVar(&cfg.Instances, "instances", 1, "how many fleet instances share the work")
	fl.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "a share's lease lasts this long unrenewed; then another instance adopts it")
	fl.DurationVar(&cfg.Engine.Deadline, "rearm-deadline", cfg.Engine.Deadline, "a pair one-sided or unprotected this long is judged")
	fl.DurationVar(&cfg.Engine.SilentAfter, "silent-after", fleet.DefaultSilentAfter, "a host that heartbeats and is not heard this long is silent (host-silent)")
	fl.DurationVar(&cfg.Engine.MaxSkew, "max-skew", fleet.DefaultMaxSkew, "refuse a record whose at or changed is more than this after NATS stored it (hosts' clocks are NTP-synchronised)")
	addNATSFlags(fl, &cfg.NATS)
	addFleetServerFlags(fl, &cfg)
	cmd.AddCommand(newFleetStatusCmd(), newFleetAddHostCmd())
	return cmd
}

// defaultStore is where the embedded NATS keeps its streams without
// --store: the state directory, or a temporary one where that cannot be
// made (a read-only root).
func defaultStore() string {
	d := "/var/lib/apmwatch/fleet"
	if os.Geteuid() != 0 {
		home, err := os.UserHomeDir()
		if err != nil {
			return filepath.Join(os.TempDir(), "apmwatch-fleet")
		}
		d = filepath.Join(home, ".local", "state", "apmwatch", "fleet")
	}
	if outfile.MkdirAll(d) != nil {
		return filepath.Join(os.TempDir(), "apmwatch-fleet")
	}
	return d
}

func newFleetStatusCmd() *cobra.Command {
	var o natsconn.NATSOptions
	var format string
	var silentAfter time.Duration
	var failOn string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print the fabric's connections that cannot fail over now",
		Long: "Reads the last record of every end from the fleet's streams and prints the connections that\n" +
			"cannot fail over now (one-sided, unprotected, half-armed), oldest first, and a summary line.\n" +
			"-o table fits 80 columns (a connection on two lines, one an end), -o wide is a connection a\n" +
			"row, -o json one document.",
		Example: "  apmwatch fleet status\n" +
			"  apmwatch fleet status --fail-on error\n" +
			"  apmwatch fleet status --nats nats://fleet:4222 -o json",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := outputFormat(cmd, format)
			if err != nil {
				return err
			}
			if err := checkNATSURL("--nats", o.URL); err != nil {
				return usageError{err}
			}
			if err := o.Validate(); err != nil {
				return usageError{err}
			}
			if silentAfter <= 0 {
				return usageError{fmt.Errorf("--silent-after must be positive: %v", silentAfter)}
			}
			var failAt *apm.Severity
			if failOn != "" {
				sev, err := apm.ParseSeverity(failOn)
				if err != nil {
					return usageError{fmt.Errorf("bad --fail-on: %w", err)}
				}
				failAt = &sev
			}
			s, err := fleet.ReadStatusSilentAfter(cmd.Context(), o, silentAfter)
			if err != nil {
				return err
			}
			switch f {
			case formatJSON:
				err = json.NewEncoder(cmd.OutOrStdout()).Encode(fleetStatusDoc(s))
			case formatWide:
				err = fleet.WriteStatusTable(cmd.OutOrStdout(), s)
			default:
				err = fleet.WriteStatusFit(cmd.OutOrStdout(), s)
			}
			if err != nil || failAt == nil {
				return err
			}
			if n := s.AtOrAbove(*failAt); n > 0 {
				return findingsError{fmt.Errorf("%d connection(s) or silent host(s) of severity %s or worse (--fail-on %s)", n, *failAt, *failAt)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&failOn, "fail-on", "", "exit with status 3, once the status is written, when a connection shown (or a silent host) is of this severity or worse: info, warning, error or critical")
	_ = cmd.RegisterFlagCompletionFunc("fail-on", cobra.FixedCompletions([]string{"info", "warning", "error", "critical"}, cobra.ShellCompDirectiveNoFileComp))
	addWideOutputFlag(cmd, &format, "")
	cmd.Flags().StringVar(&o.URL, "nats", "nats://"+natsserver.DefaultListen, "the NATS the hosts publish to")
	cmd.Flags().DurationVar(&silentAfter, "silent-after", fleet.DefaultSilentAfter, "a host whose latest heartbeat is older than this is silent: its ends' connections are unknown")
	addNATSFlags(cmd.Flags(), &o)
	return cmd
}

// fleetStatusSchema is the version of `fleet status -o json`, its
// "schema": a version only adds fields; one that removes or changes a
// field is a new number.
const fleetStatusSchema = 1

// fleetStatusDoc is `fleet status -o json`: the status with its version,
// host strings escaped, its lists [] when empty.
func fleetStatusDoc(s *fleet.Status) any {
	e := escape.Value(*s)
	if e.Rows == nil {
		e.Rows = []fleet.StatusRow{}
	}
	if e.Hosts == nil {
		e.Hosts = []fleet.HostClock{}
	}
	if e.ByState == nil {
		e.ByState = map[string]int{}
	}
	return struct {
		Schema int `json:"schema"`
		fleet.Status
	}{fleetStatusSchema, e}
}
