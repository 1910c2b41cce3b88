package main

import (
	"fmt"

	"github.com/apmwatch/apmwatch/collector"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/output"
	"github.com/spf13/cobra"
)

func newProbesCmd() *cobra.Command {
	var asJSON bool
	var opts collector.Options
	cmd := &cobra.Command{
		Use:   "probes",
		Short: "List every hook: present on this kernel, fentry or kprobe or missing, and why",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return output.RunProbes(asJSON, output.ProbesDeps{
				Plan:   func() ([]event.Hook, error) { return collector.Plan(opts) },
				Check:  collector.CheckRDMA,
				Stdout: cmd.OutOrStdout(),
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as a JSON array")
	cmd.Flags().StringSliceVar(&opts.EventHooks, "event-hook", nil, "also plan this (struct ib_event *, void *) QP event handler")
	cmd.Flags().BoolVar(&opts.ForceKprobe, "force-kprobe", false, "plan kprobes and raw tracepoints only")
	_ = cmd.Flags().MarkHidden("force-kprobe")
	return cmd
}

// noArgs rejects arguments as a usage error (exit 2).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s takes no arguments, got %q", cmd.Name(), args[0])}
	}
	return nil
}
