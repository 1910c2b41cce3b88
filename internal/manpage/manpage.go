// Package manpage writes a man page for every command of a cobra tree, as
// cobra's doc package does, with the sections a page of section 1 has:
// NAME, SYNOPSIS, DESCRIPTION (the command's Long, else its Short),
// OPTIONS, EXAMPLES (its Example), then the sections the caller adds
// (FILES, SIGNALS, EXIT STATUS, ...) and SEE ALSO. Text is markdown,
// rendered to roff by go-md2man.
package manpage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Header is the page's .TH line.
type Header struct {
	Section string // "1"
	Source  string // the program and its version
	Manual  string
	Date    time.Time // zero: SOURCE_DATE_EPOCH, else now
}

// Section is a section the caller adds to a page: its title and its body
// in markdown.
type Section struct{ Title, Body string }

// Name is the page's name for c: its command path joined by dashes.
func Name(c *cobra.Command) string { return strings.ReplaceAll(c.CommandPath(), " ", "-") }

// Tree writes NAME.SECTION into dir for c and every command under it that
// help lists; extra gives each page's added sections.
func Tree(c *cobra.Command, h Header, dir string, extra func(*cobra.Command) []Section) error {
	for _, sub := range c.Commands() {
		if !sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
			continue
		}
		if err := Tree(sub, h, dir, extra); err != nil {
			return err
		}
	}
	var sections []Section
	if extra != nil {
		sections = extra(c)
	}
	page, err := Page(c, h, sections)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, Name(c)+"."+h.section()), page, 0o644)
}

func (h Header) section() string {
	if h.Section == "" {
		return "1"
	}
	return h.Section
}

// Page renders c's page in roff.
func Page(c *cobra.Command, h Header, sections []Section) ([]byte, error) {
	date := h.Date
	if date.IsZero() {
		date = time.Now()
		if epoch := os.Getenv("SOURCE_DATE_EPOCH"); epoch != "" {
			n, err := strconv.ParseInt(epoch, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("bad SOURCE_DATE_EPOCH %q: %w", epoch, err)
			}
			date = time.Unix(n, 0)
		}
	}
	c.InitDefaultHelpFlag()
	var b bytes.Buffer
	name := Name(c)
	fmt.Fprintf(&b, "%% %q %q %q %q %q\n", strings.ToUpper(name), h.section(), date.UTC().Format("Jan 2006"), h.Source, h.Manual)
	fmt.Fprintf(&b, "# NAME\n%s \\- %s\n\n", name, c.Short)
	fmt.Fprintf(&b, "# SYNOPSIS\n**%s**\n\n", c.UseLine())
	desc := c.Long
	if desc == "" {
		desc = c.Short
	}
	fmt.Fprintf(&b, "# DESCRIPTION\n%s\n\n", desc)
	if fs := c.NonInheritedFlags(); fs.HasAvailableFlags() {
		b.WriteString("# OPTIONS\n")
		writeFlags(&b, fs)
	}
	if fs := c.InheritedFlags(); fs.HasAvailableFlags() {
		b.WriteString("# OPTIONS INHERITED FROM PARENT COMMANDS\n")
		writeFlags(&b, fs)
	}
	if c.Example != "" {
		fmt.Fprintf(&b, "# EXAMPLES\n```\n%s\n```\n\n", strings.Trim(c.Example, "\n"))
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "# %s\n%s\n\n", s.Title, strings.TrimSpace(s.Body))
	}
	var also []string
	if c.HasParent() {
		also = append(also, fmt.Sprintf("**%s(%s)**", Name(c.Parent()), h.section()))
	}
	subs := c.Commands()
	sort.Slice(subs, func(i, j int) bool { return subs[i].Name() < subs[j].Name() })
	for _, sub := range subs {
		if sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
			also = append(also, fmt.Sprintf("**%s(%s)**", Name(sub), h.section()))
		}
	}
	if len(also) > 0 {
		fmt.Fprintf(&b, "# SEE ALSO\n%s\n", strings.Join(also, ", "))
	}
	return md2man.Render(b.Bytes()), nil
}

// writeFlags lists the flags help shows, as cobra's pages do.
func writeFlags(b *bytes.Buffer, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" {
			return
		}
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			fmt.Fprintf(b, "**-%s**, **--%s**", f.Shorthand, f.Name)
		} else {
			fmt.Fprintf(b, "**--%s**", f.Name)
		}
		def := f.DefValue
		if f.Value.Type() == "string" {
			def = strconv.Quote(def)
		}
		if f.NoOptDefVal != "" {
			fmt.Fprintf(b, "[=%s]", def)
		} else {
			fmt.Fprintf(b, "=%s", def)
		}
		fmt.Fprintf(b, "\n\t%s\n\n", f.Usage)
	})
	b.WriteString("\n")
}
