package main

import (
	"encoding/json"
	"fmt"

	"github.com/apmwatch/apmwatch/internal/version"
	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print version, commit and Go version",
		Example: "  apmwatch version\n" +
			"  apmwatch version -o json",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			j, err := outputJSON(cmd, output)
			if err != nil {
				return err
			}
			info := version.Get()
			if asJSON || j {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(info)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), info)
			return err
		},
	}
	addOutputFlag(cmd, &output, "")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	deprecatedAlias(cmd, "json", "use -o json")
	return cmd
}
