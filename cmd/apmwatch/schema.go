package main

import (
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/spf13/cobra"
)

func newSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of a finding line",
		Long: "Prints the JSON Schema (draft 2020-12) of the finding line every output writes: trace's JSON\n" +
			"stream, the audit's finding log and NATS lines, the postmortem report's findings, the fleet's\n" +
			"lines. It is the one built into this binary; \"schema\" in each line is its version, and within\n" +
			"a version fields are only added (the schema allows fields it does not name). See docs/events.md.",
		Example: "  apmwatch schema > finding.schema.json\n" +
			"  apmwatch schema | jq '.\"$defs\".kind.enum'",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(findingline.JSONSchema)
			return err
		},
	}
}
