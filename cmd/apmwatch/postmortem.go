package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/apmwatch/apmwatch/apm"
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
	var since, until string
	cmd := &cobra.Command{
		Use:   "postmortem FILE...",
		Short: "Replay recordings through the APM model: summary, findings, timelines, both ends of a connection",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("give at least one recording file")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := filters.filter()
			if err != nil {
				return err
			}
			o.Devices, o.QPNs = f.Devices, f.QPNs
			if o.Since, err = postmortem.ParseBound(since); err != nil {
				return usageError{err}
			}
			if o.Until, err = postmortem.ParseBound(until); err != nil {
				return usageError{err}
			}
			asJSON, err := outputJSON(cmd, format)
			if err != nil {
				return err
			}
			out.Format = "text"
			if asJSON {
				out.Format = "json"
			}
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
			return postmortem.Main(cmd.Context(), args, o, out)
		},
	}
	fl := cmd.Flags()
	addOutputFlag(cmd, &format, "")
	fl.StringVar(&out.HTML, "html", "", "also write a self-contained HTML report to this file")
	addFilterFlags(fl, &filters, filterQP)
	fl.StringVar(&since, "since", "", "show from this time (RFC 3339, or an offset from the first event: 30s)")
	fl.StringVar(&until, "until", "", "show up to this time (as --since)")
	fl.StringToStringVar(&o.As, "as", nil, "FILE=NAME: name the side a file was recorded on (default: its host name)")
	fl.BoolVar(&o.All, "all", false, "timelines of every QP, not only those with APM activity")
	fl.IntVar(&o.MaxEntries, "max-entries", 2000, "timeline events kept per QP")
	addModelFlags(fl, &o.Config)
	return cmd
}
