package main

import (
	"errors"

	"github.com/apmwatch/apmwatch/collector"
	"github.com/apmwatch/apmwatch/event"
	apmoutput "github.com/apmwatch/apmwatch/output"
	"github.com/spf13/cobra"
)

func newProbesCmd() *cobra.Command {
	var asJSON bool
	var output string
	var opts collector.Options
	cmd := &cobra.Command{
		Use:   "probes",
		Short: "List every hook, how it attaches on this kernel, and why",
		Long: "Lists every hook apmwatch knows: whether this kernel has it, how it attaches (fentry, kprobe,\n" +
			"tracepoint) or why it is missing or skipped. As root the planned programs are loaded to verify\n" +
			"them (nothing is attached); without the privileges the plan is printed and said to be unverified.\n" +
			"-o table fits 80 columns, -o wide adds whether each hook is present and the signal it carries,\n" +
			"-o json is one document, {\"schema\":1,\"hooks\":[...]} (the deprecated --json: the bare array).",
		Example: "  apmwatch probes\n" +
			"  apmwatch probes -o wide\n" +
			"  apmwatch probes --event-hook mymodule:my_qp_event_handler -o json",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(cmd, output)
			if err != nil {
				return err
			}
			return apmoutput.RunProbes(asJSON || format == formatJSON, apmoutput.ProbesDeps{
				Wide:         format == formatWide,
				Plan:         func() ([]event.Hook, error) { return collector.Plan(opts) },
				Verify:       func() ([]event.Hook, error) { return collector.Verify(opts) },
				Unprivileged: func(err error) bool { return errors.Is(err, collector.ErrNoPrivilege) },
				Check:        collector.CheckRDMA,
				Stdout:       cmd.OutOrStdout(),
				Stderr:       cmd.ErrOrStderr(),
			})
		},
	}
	addWideOutputFlag(cmd, &output, " (one document)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as a JSON array")
	deprecatedAlias(cmd, "json", "use -o json")
	addAttachFlags(cmd.Flags(), &opts)
	cmd.Flags().BoolVar(&opts.ForceKprobe, "force-kprobe", false, "plan kprobes and raw tracepoints only")
	_ = cmd.Flags().MarkHidden("force-kprobe")
	return cmd
}
