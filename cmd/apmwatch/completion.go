package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/apmwatch/apmwatch/actuator"
	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/spf13/cobra"
)

// newCompletionCmd prints cobra's completion script for a shell.
func newCompletionCmd() *cobra.Command {
	return &cobra.Command{
		Use:       "completion bash|zsh|fish",
		Short:     "Print the shell completion script (the packages install it)",
		Example:   "  source <(apmwatch completion bash)\n  apmwatch completion fish > ~/.config/fish/completions/apmwatch.fish",
		Args:      exactArgs(1),
		ValidArgs: []string{"bash", "zsh", "fish"},
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			}
			return usageError{fmt.Errorf("no completion for shell %q: want bash, zsh or fish", args[0])}
		},
	}
}

// Completion of flag values (cobra's __complete, which the scripts call).

var formatHelp = map[string]string{
	formatTable: "for people",
	formatWide:  "the table in full, past 80 columns",
	formatJSON:  "for machines",
}

// completeFormats completes --output with the command's formats.
func completeFormats(formats []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, f := range formats {
			out = append(out, cobra.CompletionWithDesc(f, formatHelp[f]))
		}
		return withPrefix(out, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// withPrefix keeps the values that start with what was typed.
func withPrefix(values []cobra.Completion, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, v := range values {
		if strings.HasPrefix(v, prefix) {
			out = append(out, v)
		}
	}
	return out
}

// completeList completes one value of a flag that takes a comma-separated
// list: the values not given yet, after the ones typed before the last
// comma.
func completeList(toComplete string, values []cobra.Completion) ([]cobra.Completion, cobra.ShellCompDirective) {
	done, last := "", toComplete
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		done, last = toComplete[:i+1], toComplete[i+1:]
	}
	given := strings.Split(done, ",")
	var out []cobra.Completion
	for _, v := range values {
		name, _, _ := strings.Cut(v, "\t")
		if strings.HasPrefix(name, last) && !slices.Contains(given, name) {
			out = append(out, done+v)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// kindValues are the values of --kind: the event kinds and, where the
// model runs (findings), "finding" and every finding kind of the registry.
func kindValues(findings bool) []cobra.Completion {
	var out []cobra.Completion
	for _, k := range event.Kinds() {
		out = append(out, cobra.CompletionWithDesc(k.String(), "event kind"))
	}
	if findings {
		out = append(out, cobra.CompletionWithDesc("finding", "every finding"))
		for _, k := range apm.Registry() {
			out = append(out, cobra.CompletionWithDesc(string(k.Kind), fmt.Sprintf("finding kind (%s, by the %s)", k.Severity, k.By)))
		}
	}
	return out
}

// sysInfiniband is where the RDMA devices of this host are listed.
var sysInfiniband = "/sys/class/infiniband"

// deviceValues are the RDMA devices of this host, read at completion time.
func deviceValues() []cobra.Completion {
	ents, err := os.ReadDir(sysInfiniband)
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, e := range ents {
		out = append(out, cobra.CompletionWithDesc(e.Name(), "RDMA device"))
	}
	return out
}

// completeDevices completes a flag naming one RDMA device of this host.
func completeDevices(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return withPrefix(deviceValues(), toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeFilterFlags completes the filter flags addFilterFlags added:
// --device with this host's RDMA devices (not for postmortem, whose
// recordings may come from other hosts), --kind with the kinds the command
// filters (findings: it runs the model).
func completeFilterFlags(cmd *cobra.Command, localDevices, findings bool) {
	if localDevices && cmd.Flags().Lookup("device") != nil {
		_ = cmd.RegisterFlagCompletionFunc("device", func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completeList(toComplete, deviceValues())
		})
	}
	if cmd.Flags().Lookup("kind") != nil {
		_ = cmd.RegisterFlagCompletionFunc("kind", func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completeList(toComplete, kindValues(findings))
		})
	}
}

// actuateOps are the operations of apmwatch actuate, in its Use line's order.
var actuateOps = []struct {
	op   actuator.Op
	help string
}{
	{actuator.OpQuery, "read the QP's state and paths (changes nothing)"},
	{actuator.OpLoadAlt, "load a new alternate path (--alt-...)"},
	{actuator.OpRearm, "rearm a migrated QP (REARM), loading --alt-... first when given"},
	{actuator.OpMigrate, "force a migration onto the alternate (MIGRATED)"},
}

// completeActuateOp completes actuate's one argument, the operation.
func completeActuateOp(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, o := range actuateOps {
		out = append(out, cobra.CompletionWithDesc(string(o.op), o.help))
	}
	return withPrefix(out, toComplete), cobra.ShellCompDirectiveNoFileComp
}
