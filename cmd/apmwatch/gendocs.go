//go:build gendocs

package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/apmwatch/apmwatch/internal/manpage"
	"github.com/spf13/cobra"
)

// Built only with -tags gendocs (make package): `apmwatch gen-docs DIR`
// writes the man pages (DIR/man1/apmwatch-*.1, with the FILES, SIGNALS and
// EXIT STATUS of manpages.go) and the shell completions
// (DIR/completions/apmwatch.{bash,zsh,fish}) that the packages install.
func init() {
	extraCommands = append(extraCommands, func() *cobra.Command {
		return &cobra.Command{
			Use:    "gen-docs DIR",
			Short:  "Write the man pages and shell completions into DIR",
			Hidden: true,
			Args:   exactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				root := cmd.Root()
				root.RemoveCommand(cmd)
				man := filepath.Join(args[0], "man1")
				comp := filepath.Join(args[0], "completions")
				for _, d := range []string{man, comp} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						return err
					}
				}
				if err := writeManPages(root, man); err != nil {
					return fmt.Errorf("writing man pages: %w", err)
				}
				for file, gen := range map[string]func(string) error{
					"apmwatch.bash": func(f string) error { return root.GenBashCompletionFileV2(f, true) },
					"apmwatch.zsh":  root.GenZshCompletionFile,
					"apmwatch.fish": func(f string) error { return root.GenFishCompletionFile(f, true) },
				} {
					if err := gen(filepath.Join(comp, file)); err != nil {
						return fmt.Errorf("writing %s: %w", file, err)
					}
				}
				return nil
			},
		}
	})
}

// writeManPages writes a page for every command of root into dir.
func writeManPages(root *cobra.Command, dir string) error {
	hdr := manpage.Header{Section: "1", Source: "apmwatch", Manual: "apmwatch manual"}
	return manpage.Tree(root, hdr, dir, func(c *cobra.Command) []manpage.Section {
		var out []manpage.Section
		for _, s := range manSections(c) {
			out = append(out, manpage.Section{Title: s.Title, Body: s.Body})
		}
		return out
	})
}
