package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/internal/manpage"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// manPages writes the page of every command as gen-docs does and returns
// them (roff) by command path.
func manPages(t *testing.T) map[string]string {
	t.Helper()
	root := newRootCmd()
	dir := t.TempDir()
	err := manpage.Tree(root, manpage.Header{Section: "1", Source: "apmwatch", Manual: "apmwatch manual"}, dir,
		func(c *cobra.Command) []manpage.Section {
			var out []manpage.Section
			for _, s := range manSections(c) {
				out = append(out, manpage.Section{Title: s.Title, Body: s.Body})
			}
			return out
		})
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{}
	walk(root, func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c != root {
			return
		}
		b, err := os.ReadFile(filepath.Join(dir, manpage.Name(c)+".1"))
		if err != nil {
			t.Errorf("no page for %s: %v", c.CommandPath(), err)
			return
		}
		pages[c.CommandPath()] = string(b)
	})
	return pages
}

// section is the text of a page's section, "" when it has none.
func section(page, title string) string {
	re := regexp.MustCompile(`(?m)^\.SH "?` + regexp.QuoteMeta(title) + `"?\n`)
	loc := re.FindStringIndex(page)
	if loc == nil {
		return ""
	}
	rest := page[loc[1]:]
	if i := strings.Index(rest, "\n.SH "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// Every page has its command's description, options, examples and exit
// status; the commands that handle signals or use files have SIGNALS and
// FILES, with what the code does (SIGHUP reopens audit's finding log).
func TestManPagesHaveTheirSections(t *testing.T) {
	pages := manPages(t)
	root := newRootCmd()
	files := []string{"apmwatch", "apmwatch trace", "apmwatch record", "apmwatch probes", "apmwatch postmortem", "apmwatch audit",
		"apmwatch fleet", "apmwatch qp list", "apmwatch qp show", "apmwatch actuate", "apmwatch actuate policy-check",
		"apmwatch hca-check", "apmwatch btf gen", "apmwatch completion"}
	signals := []string{"apmwatch trace", "apmwatch record", "apmwatch audit", "apmwatch fleet", "apmwatch hca-check"}
	if len(pages) < 17 {
		t.Fatalf("%d pages", len(pages))
	}
	for path, page := range pages {
		c, _, err := root.Find(strings.Fields(path)[1:])
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "SEE ALSO"} {
			if section(page, s) == "" {
				t.Errorf("%s: no %s", path, s)
			}
		}
		group := c.HasSubCommands() // a command that only groups others: no examples needed
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { group = group && f.Name == "help" })
		if !group {
			for _, s := range []string{"OPTIONS", "EXAMPLES"} {
				if section(page, s) == "" {
					t.Errorf("%s: no %s", path, s)
				}
			}
			examples := strings.ReplaceAll(strings.TrimSpace(c.Example), " \\\n", " ") // a line continued
			for _, l := range strings.Split(examples, "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), path) && !strings.Contains(l, path+" ") {
					t.Errorf("%s: example %q is not of this command", path, l)
				}
			}
		}
		exit := section(page, "EXIT STATUS")
		for _, want := range []string{`\fB0\fP: success`, `\fB1\fP: a failure`, `\fB2\fP: a usage error`} {
			if !strings.Contains(exit, want) {
				t.Errorf("%s: EXIT STATUS lacks %q:\n%s", path, want, exit)
			}
		}
		if got := section(page, "FILES") != ""; got != slices.Contains(files, path) {
			t.Errorf("%s: FILES %v", path, got)
		}
		sig := section(page, "SIGNALS")
		if got := sig != ""; got != slices.Contains(signals, path) {
			t.Errorf("%s: SIGNALS %v", path, got)
		}
		if strings.Contains(sig, "SIGHUP") != (path == "apmwatch audit" || path == "apmwatch fleet") { // the commands that handle it
			t.Errorf("%s: SIGHUP in SIGNALS: %q", path, sig)
		}
	}
	audit := pages["apmwatch audit"]
	for _, want := range []string{"/etc/default/apmwatch", "/var/lib/apmwatch/", "/var/log/apmwatch/findings.jsonl", "flight-*", "incidents/"} {
		if !strings.Contains(section(audit, "FILES"), want) {
			t.Errorf("audit FILES lacks %q:\n%s", want, section(audit, "FILES"))
		}
	}
	if !strings.Contains(section(pages["apmwatch fleet"], "FILES"), "/etc/default/apmwatch-fleet") {
		t.Errorf("fleet FILES:\n%s", section(pages["apmwatch fleet"], "FILES"))
	}
	for _, p := range []string{"apmwatch trace", "apmwatch record", "apmwatch audit", "apmwatch fleet"} {
		s := section(pages[p], "SIGNALS")
		if !strings.Contains(s, "SIGTERM") || !strings.Contains(s, "SIGINT") || !strings.Contains(s, "exit status 0") && !strings.Contains(s, "status 0") {
			t.Errorf("%s SIGNALS: %q", p, s)
		}
	}
}

// The exit statuses the pages state are the ones the commands return, and
// every command the sections name exists.
func TestManExitStatusIsTheCode(t *testing.T) {
	if _, _, err := runErr("version", "--no-such-flag"); exitCode(err) != exitUsage || exitUsage != 2 {
		t.Errorf("usage error: exit %d", exitCode(err))
	}
	if _, _, err := runErr("postmortem", filepath.Join(t.TempDir(), "missing.rec")); err == nil || exitCode(err) != exitFailure || exitFailure != 1 {
		t.Errorf("a failure: %v, exit %d", err, exitCode(err))
	}
	paths := map[string]bool{}
	walk(newRootCmd(), func(c *cobra.Command) { paths[c.CommandPath()] = true })
	for _, m := range []map[string][]string{manFiles, manSignals} {
		for p := range m {
			if !paths[p] {
				t.Errorf("man sections for %q: no such command", p)
			}
		}
	}
	for p := range manExit {
		if !paths[p] {
			t.Errorf("man exit status for %q: no such command", p)
		}
	}
}
