// Package helptext makes every command's --help fit an 80-column terminal:
// the prose of its long description reflowed to the width, its flags'
// usages wrapped under their names (pflag's FlagUsagesWrapped). Lines that
// start with a space (examples, lists) are kept as they are written.
package helptext

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// Width is the terminal width --help fits.
const Width = 80

// Apply sets root's help and usage templates (its subcommands inherit
// them).
func Apply(root *cobra.Command) {
	cobra.AddTemplateFunc("reflow", func(s string) string { return Reflow(s, Width) })
	root.SetHelpTemplate(`{{with (or .Long .Short)}}{{. | reflow | trimTrailingWhitespaces}}

{{end}}{{if or .Runnable .HasSubCommands}}{{.UsageString}}{{end}}`)
	t := strings.ReplaceAll(root.UsageTemplate(), "FlagUsages |", fmt.Sprintf("FlagUsagesWrapped %d |", Width))
	root.SetUsageTemplate(t)
}

// Reflow rewraps s to width columns: a paragraph (lines between blank
// lines) is one run of words; a line that starts with a space stays as
// written. A word longer than the width stands alone on its line.
func Reflow(s string, width int) string {
	var out []string
	var para []string
	flush := func() {
		if len(para) > 0 {
			out = append(out, wrap(strings.Join(para, " "), width)...)
			para = para[:0]
		}
	}
	for _, line := range strings.Split(s, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			flush()
			out = append(out, "")
		case strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t"):
			flush()
			out = append(out, line)
		default:
			para = append(para, strings.TrimSpace(line))
		}
	}
	flush()
	return strings.Join(out, "\n")
}

func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
