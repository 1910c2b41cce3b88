package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/fleet"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/postmortem"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newPostmortemCmd() *cobra.Command {
	o := postmortem.Options{Config: apm.DefaultConfig()}
	o.Config.MaxQPs = postmortem.DefaultMaxQPs
	var out postmortem.Output
	var format string
	var filters filterFlags
	var since, until, failOn string
	var fromNATS natsconn.NATSOptions
	cmd := &cobra.Command{
		Use:   "postmortem FILE... | --nats URL --since T",
		Short: "Replay recordings through the APM model: findings, timelines",
		Long: "Replays recordings (apmwatch record, trace --record, the audit's flight recorder and incident\n" +
			"bundles) through the APM model the live tool runs, on any machine, without root: the recordings,\n" +
			"the clock alignment, the summary, the findings with their evidence and fix, and a timeline per QP\n" +
			"with APM activity (--all: every QP). Recordings of both ends of a connection pair up into two-sided\n" +
			"timelines (one-sided-rearm). -o table fits the timelines to 80 columns, -o wide shows them in full,\n" +
			"-o json is one document; --html also writes a self-contained page. On a terminal a progress bar\n" +
			"shows the bytes read. With --nats it reads a time range of the fleet's streams instead of files.\n" +
			"See docs/postmortem.md.",
		Example: "  apmwatch postmortem apm.rec\n" +
			"  apmwatch postmortem apm.rec.0000*\n" +
			"  apmwatch postmortem --qpn 17 --since +30s --until +2m apm.rec\n" +
			"  apmwatch postmortem --html report.html hostA.rec hostB.rec\n" +
			"  apmwatch postmortem --fail-on error apm.rec\n" +
			"  apmwatch postmortem --nats nats://fleet:4222 --since -1h",
		Args: func(_ *cobra.Command, args []string) error {
			if fromNATS.URL != "" && len(args) > 0 {
				return usageError{errors.New("give recording files or --nats, not both")}
			}
			if len(args) == 0 && fromNATS.URL == "" {
				return usageError{errors.New("give at least one recording file (or --nats URL)")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if failOn != "" {
				sev, err := apm.ParseSeverity(failOn)
				if err != nil {
					return usageError{fmt.Errorf("bad --fail-on: %w", err)}
				}
				if fromNATS.URL != "" {
					return usageError{errors.New("--fail-on judges recording files, not --nats")}
				}
				out.FailOn = &sev
			}
			if fromNATS.URL != "" {
				return postmortemNATS(cmd, fromNATS, since, until, format, o.Config.RearmDeadline)
			}
			f, err := filters.filter()
			if err != nil {
				return err
			}
			o.Devices, o.QPNs = f.Devices, f.QPNs
			if o.Since, err = bound(cmd, "--since", since, postmortem.BareFromFirst); err != nil {
				return err
			}
			if o.Until, err = bound(cmd, "--until", until, postmortem.BareFromFirst); err != nil {
				return err
			}
			shape, err := outputFormat(cmd, format)
			if err != nil {
				return err
			}
			out.Format = map[string]string{formatTable: "text", formatWide: "wide", formatJSON: "json"}[shape]
			if err := o.Config.Validate(); err != nil {
				return usageError{err}
			}
			if o.MaxEntries < 1 {
				return usageError{fmt.Errorf("--max-entries must be at least 1: %d", o.MaxEntries)}
			}
			stderr := cmd.ErrOrStderr()
			o.Warn = func(s string) { fmt.Fprintln(stderr, s) }
			if stderr == os.Stderr && term.IsTerminal(int(os.Stderr.Fd())) {
				o.Progress = stderr
			}
			out.Stdout = cmd.OutOrStdout()
			return postmortemExit(postmortem.Main(cmd.Context(), args, o, out))
		},
	}
	fl := cmd.Flags()
	addWideOutputFlag(cmd, &format, "")
	fl.StringVar(&out.HTML, "html", "", "also write a self-contained HTML report to this file")
	addFilterFlags(fl, &filters, filterQP)
	completeFilterFlags(cmd, false, true)
	fl.StringVar(&since, "since", "", "show from this time: RFC 3339, +DURATION after the first event (+30s), -DURATION before now (-1h)")
	fl.StringVar(&until, "until", "", "show up to this time (as --since)")
	fl.StringVar(&failOn, "fail-on", "", "exit with status 3, once the report is written, when a finding shown is of this severity or worse: info, warning, error or critical")
	_ = cmd.RegisterFlagCompletionFunc("fail-on", cobra.FixedCompletions([]string{"info", "warning", "error", "critical"}, cobra.ShellCompDirectiveNoFileComp))
	fl.StringToStringVar(&o.As, "as", nil, "FILE=NAME: name the side a file was recorded on (default: its host name)")
	fl.BoolVar(&o.All, "all", false, "timelines of every QP, not only those with APM activity")
	fl.IntVar(&o.MaxEntries, "max-entries", 2000, "timeline events kept per QP")
	addModelFlags(fl, &o.Config)
	fl.StringVar(&fromNATS.URL, "nats", "", "read the fleet streams (connection records, finding lines) of --since..--until from this NATS instead of files")
	addNATSFlags(fl, &fromNATS)
	return cmd
}

// postmortemExit gives postmortem's errors their exit status: findings at
// or above --fail-on 3, an inverted window a usage error.
func postmortemExit(err error) error {
	var f *postmortem.FailError
	switch {
	case errors.As(err, &f):
		return findingsError{err}
	case errors.Is(err, postmortem.ErrEmptyWindow):
		return usageError{err}
	}
	return err
}

// postmortemNATS replays a time range of the fleet streams. Its --since
// and --until are RFC 3339 times or -DURATION before now (--since -1h).
func postmortemNATS(cmd *cobra.Command, o natsconn.NATSOptions, since, until, format string, deadline time.Duration) error {
	if err := checkNATSURL("--nats", o.URL); err != nil {
		return usageError{err}
	}
	if err := o.Validate(); err != nil {
		return usageError{err}
	}
	asJSON, err := outputJSON(cmd, format)
	if err != nil {
		return err
	}
	if since == "" {
		return usageError{errors.New("--nats needs --since (RFC 3339, or -DURATION before now: -1h)")}
	}
	now := time.Now()
	var h fleet.HistoryOptions
	for _, b := range []struct {
		flag, val string
		to        *time.Time
	}{{"--since", since, &h.Since}, {"--until", until, &h.Until}} {
		bd, err := bound(cmd, b.flag, b.val, postmortem.BareBeforeNow)
		if err != nil {
			return err
		}
		if bd.FromFirst() {
			return usageError{fmt.Errorf("%s %s with --nats: %w", b.flag, b.val, postmortem.ErrRelativeToFirst)}
		}
		*b.to = bd.Time(time.Time{}, now)
	}
	if h.Until.IsZero() {
		h.Until = now
	}
	if h.Until.Before(h.Since) {
		return usageError{fmt.Errorf("%w (since %s, until %s)", postmortem.ErrEmptyWindow, h.Since.Format(time.RFC3339Nano), h.Until.Format(time.RFC3339Nano))}
	}
	h.NATS, h.Deadline = o, deadline
	hist, err := fleet.ReadHistory(cmd.Context(), h)
	if err != nil {
		return err
	}
	if asJSON {
		return fleet.WriteHistoryJSON(cmd.OutOrStdout(), hist)
	}
	return fleet.WriteHistoryText(cmd.OutOrStdout(), hist)
}

// bound parses a --since or --until value (postmortem.ParseBound), a bad
// one a usage error, and prints the warning of a deprecated bare duration.
func bound(cmd *cobra.Command, flag, val string, bare postmortem.BareMeaning) (postmortem.Bound, error) {
	b, warning, err := postmortem.ParseBound(flag, val, bare)
	if err != nil {
		return b, usageError{err}
	}
	if warning != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "apmwatch: warning:", warning)
	}
	return b, nil
}
