package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// usageError marks a wrong flag or argument (exit 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// extraCommands are added by build-tagged files (gendocs.go).
var extraCommands []func() *cobra.Command

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "apmwatch",
		Short:         "Watch InfiniBand Automatic Path Migration: observe, judge, act",
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
	return root
}
