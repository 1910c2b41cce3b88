package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The command-line convention every command follows:
//   - -o/--output table|json picks the output format (addOutputFlag);
//   - a file to write is -w/--write FILE (record);
//   - completion scripts come from cobra (apmwatch completion SHELL);
//   - a wrong flag, flag value or argument is a usage error: one line, exit 2
//     (usageConvention walks the tree and enforces it for arguments).
// Old spellings keep working and warn on stderr.

// addOutputFlag registers -o/--output on cmd, default table.
func addOutputFlag(cmd *cobra.Command, v *string, what string) {
	cmd.Flags().StringVarP(v, "output", "o", "table", "table or json"+what)
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

// outputJSON reads an --output value: json or table. "text", the old name
// of table, still works and warns.
func outputJSON(cmd *cobra.Command, s string) (bool, error) {
	switch s {
	case "json":
		return true, nil
	case "table":
		return false, nil
	case "text":
		fmt.Fprintln(cmd.ErrOrStderr(), "apmwatch: -o text is deprecated, use -o table")
		return false, nil
	}
	return false, usageError{fmt.Errorf("bad --output %q: want table or json", s)}
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
