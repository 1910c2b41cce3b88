package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/apmwatch/apmwatch/internal/helptext"
	"github.com/apmwatch/apmwatch/internal/version"
	"github.com/spf13/cobra"
)

// usageError marks a wrong flag or argument (exit 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// findingsError marks a command that did its work and found findings at
// or above --fail-on (exit 3): automation tells it from a failure.
type findingsError struct{ err error }

func (f findingsError) Error() string { return f.err.Error() }
func (f findingsError) Unwrap() error { return f.err }

// The exit statuses: 0 success, and these (documented in each man page).
const (
	exitFailure  = 1
	exitUsage    = 2
	exitFindings = 3
)

func exitCode(err error) int {
	var u usageError
	var f findingsError
	switch {
	case errors.As(err, &u):
		return exitUsage
	case errors.As(err, &f):
		return exitFindings
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
		Version:       version.Get().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n") // --version prints what "apmwatch version" does
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.SetHelpCommand(newHelpCmd())
	root.AddCommand(newVersionCmd())
	root.AddCommand(newTraceCmd(), newProbesCmd())
	root.AddCommand(newRecordCmd(), newPostmortemCmd())
	root.AddCommand(newAuditCmd(), newFleetCmd())
	root.AddCommand(newQPCmd(), newActuateCmd(), newHCACheckCmd(), newRoutesCmd())
	root.AddCommand(newBTFCmd(), newSchemaCmd())
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newCompletionCmd())
	for _, c := range extraCommands {
		root.AddCommand(c())
	}
	usageConvention(root)
	helptext.Apply(root)
	return root
}

// newHelpCmd is cobra's help command, except that a topic it does not
// know is a usage error (exit 2), not help and success.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Help about any command: apmwatch help COMMAND is apmwatch COMMAND --help.",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil || cmd == nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					names = append(names, sub.Name())
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return usageError{fmt.Errorf("unknown help topic %q: see apmwatch help", strings.Join(args, " "))}
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}
