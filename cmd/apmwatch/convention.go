package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The command-line convention every command follows:
//   - -o/--output table|json picks the output format (addOutputFlag), and
//     table|wide|json where the command prints a table (addWideOutputFlag):
//     table fits 80 columns, wide is the table in full;
//   - a file to write is -w/--write FILE (record);
//   - completion scripts come from cobra (apmwatch completion SHELL);
//   - a wrong flag, flag value or argument is a usage error: one line, exit 2
//     (usageConvention walks the tree and enforces it for arguments).
// Old spellings keep working and warn on stderr.

// The output formats: table for people (it fits an 80-column terminal
// where the command has a wide form), wide (the same table in full, past 80
// columns), json for machines.
const (
	formatTable = "table"
	formatWide  = "wide"
	formatJSON  = "json"
)

// formatsKey annotates --output with the formats the command takes.
const formatsKey = "apmwatch-formats"

// addOutputFlag registers -o/--output on cmd, default table: table or json.
func addOutputFlag(cmd *cobra.Command, v *string, what string) {
	addFormatFlag(cmd, v, "table or json"+what, formatTable, formatJSON)
}

// addWideOutputFlag registers -o/--output on a command that prints a
// table: table (fits 80 columns, long cells cut with an ellipsis), wide
// (the table in full) or json.
func addWideOutputFlag(cmd *cobra.Command, v *string, what string) {
	addFormatFlag(cmd, v, "table or json"+what+"; wide: the table in full, past 80 columns", formatTable, formatWide, formatJSON)
}

func addFormatFlag(cmd *cobra.Command, v *string, usage string, formats ...string) {
	cmd.Flags().StringVarP(v, "output", "o", formatTable, usage)
	f := cmd.Flags().Lookup("output")
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[formatsKey] = formats
	_ = cmd.RegisterFlagCompletionFunc("output", completeFormats(formats))
}

// formatsOf lists the formats a command's --output takes.
func formatsOf(cmd *cobra.Command) []string {
	if f := cmd.Flags().Lookup("output"); f != nil && len(f.Annotations[formatsKey]) > 0 {
		return f.Annotations[formatsKey]
	}
	return []string{formatTable, formatJSON}
}

// deprecatedAlias hides an old flag that keeps working; using it warns
// on stderr with advice (usageConvention prints it once the flags are
// parsed).
func deprecatedAlias(cmd *cobra.Command, name, advice string) {
	f := cmd.Flags().Lookup(name)
	f.Hidden = true
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[deprecatedKey] = []string{advice}
}

const deprecatedKey = "apmwatch-deprecated"

func warnDeprecated(cmd *cobra.Command) {
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if adv := f.Annotations[deprecatedKey]; len(adv) > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "apmwatch: --%s is deprecated, %s\n", f.Name, adv[0])
		}
	})
}

// outputFormat reads an --output value: one of the command's formats.
// "text", the old name of table, still works and warns.
func outputFormat(cmd *cobra.Command, s string) (string, error) {
	formats := formatsOf(cmd)
	if s == "text" {
		fmt.Fprintln(cmd.ErrOrStderr(), "apmwatch: -o text is deprecated, use -o table")
		return formatTable, nil
	}
	if slices.Contains(formats, s) {
		return s, nil
	}
	want := strings.Join(formats[:len(formats)-1], ", ") + " or " + formats[len(formats)-1]
	return "", usageError{fmt.Errorf("bad --output %q: want %s", s, want)}
}

// outputJSON reads an --output value: json or a table.
func outputJSON(cmd *cobra.Command, s string) (bool, error) {
	f, err := outputFormat(cmd, s)
	return f == formatJSON, err
}

// noArgs rejects arguments as a usage error (exit 2).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), args[0])}
	}
	return nil
}

// unknownCommand rejects arguments to a command that only groups others.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())}
	}
	return nil
}

// exactArgs wants n arguments, named by the command's Use line.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s), got %d (usage: %s)", cmd.CommandPath(), n, len(args), cmd.UseLine())}
		}
		return nil
	}
}

// usageConvention makes every argument error in the tree a usage error:
// a command without an Args check takes none, any other check's error is
// wrapped, and a command that only groups others shows its help when
// called alone and rejects anything else (cobra would print help and
// succeed).
func usageConvention(c *cobra.Command) {
	for _, sub := range c.Commands() {
		usageConvention(sub)
	}
	if c.Name() == "help" {
		return
	}
	check := c.Args
	switch {
	case c.HasSubCommands() && !c.Runnable():
		check = unknownCommand
	case check == nil:
		check = noArgs
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		warnDeprecated(cmd)
		err := check(cmd, args)
		var u usageError
		if err != nil && !errors.As(err, &u) {
			return usageError{err}
		}
		return err
	}
	if !c.Runnable() {
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
}
