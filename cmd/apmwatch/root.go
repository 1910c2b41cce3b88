package main

import (
	"errors"

	"github.com/apmwatch/apmwatch/internal/helptext"
	"github.com/spf13/cobra"
)

// usageError marks a wrong flag or argument (exit 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// The exit statuses: 0 success, and these (documented in each man page).
const (
	exitFailure = 1
	exitUsage   = 2
)

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	return exitFailure
}

// extraCommands are added by build-tagged files (gendocs.go).
var extraCommands []func() *cobra.Command

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "apmwatch",
		Short: "Watch InfiniBand Automatic Path Migration: observe, judge, act",
		Long: "InfiniBand Automatic Path Migration lets an RC QP fail over to a pre-loaded alternate path in\n" +
			"hardware; after every failover software on both ends must load a new alternate and rearm, or the\n" +
			"next path failure kills the connection. apmwatch watches that from the kernel: eBPF probes on\n" +
			"ib_core, ib_uverbs and ib_cm see every alternate-path load, rearm, migration, QP event, CM notify\n" +
			"and LAP/APR MAD, a per-QP model of the APM state machine judges them (missed rearm, rearm onto a\n" +
			"stale path, LAP race, ...), and a policy-bound actuator can correct a QP. A command that prints\n" +
			"takes -o table|json (and wide where it prints a table: table fits 80 columns); a wrong flag, flag\n" +
			"value or argument is one line on stderr and exit status 2.",
		Example: "  apmwatch probes\n" +
			"  apmwatch trace\n" +
			"  apmwatch postmortem examples/ib-unprotected-failure.rec\n" +
			"  apmwatch audit --findings /var/log/apmwatch/findings.jsonl \\\n      --recorder-dir /var/lib/apmwatch",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newVersionCmd())
	root.AddCommand(newTraceCmd(), newProbesCmd())
	root.AddCommand(newRecordCmd(), newPostmortemCmd())
	root.AddCommand(newAuditCmd(), newFleetCmd())
	root.AddCommand(newQPCmd(), newActuateCmd(), newHCACheckCmd())
	root.AddCommand(newBTFCmd())
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newCompletionCmd())
	for _, c := range extraCommands {
		root.AddCommand(c())
	}
	usageConvention(root)
	helptext.Apply(root)
	return root
}
