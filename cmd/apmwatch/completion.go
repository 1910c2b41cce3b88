package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newCompletionCmd prints cobra's completion script for a shell.
func newCompletionCmd() *cobra.Command {
	return &cobra.Command{
		Use:       "completion bash|zsh|fish",
		Short:     "Print the shell completion script (the packages install it)",
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
