package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docCode is a piece of code in the documentation: a code span, or a line
// of a fenced block (continuation lines joined), with where it is.
type docCode struct {
	file     string
	line     int
	headings []string // the headings above it, by level (1: the title)
	para     int      // the paragraph it is in (lines between blank lines)
	text     string
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// docCodes reads the code of a markdown file: code spans outside fenced
// blocks, and the lines of fenced blocks that are not Go, JSON or YAML;
// and the text of its paragraphs.
func docCodes(t *testing.T, file string) ([]docCode, []string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docCode
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	var headings []string
	fence, skip := false, false
	pending := ""
	paras := []string{""}
	para := 0
	for sc.Scan() {
		n++
		l := sc.Text()
		if strings.TrimSpace(l) == "" {
			paras = append(paras, "")
			para++
		} else {
			paras[para] += l + "\n"
		}
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			lang := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "```"))
			fence, skip = !fence, !fence && lang != "" && lang != "sh"
			pending = ""
			continue
		}
		switch {
		case fence && skip:
		case fence:
			if strings.HasSuffix(l, "\\") {
				pending += strings.TrimSuffix(l, "\\") + " "
				continue
			}
			out = append(out, docCode{file, n, headings, para, pending + l})
			pending = ""
		case strings.HasPrefix(l, "#"):
			level := len(l) - len(strings.TrimLeft(l, "#"))
			headings = append(slices.Clone(headings[:min(level-1, len(headings))]), make([]string, max(0, level-1-len(headings)))...)
			headings = append(headings, strings.TrimSpace(l[level:]))
			fallthrough
		default:
			for _, m := range codeSpan.FindAllStringSubmatch(l, -1) {
				out = append(out, docCode{file, n, headings, para, m[1]})
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out, paras
}

// A flag token: -x or --name, maybe =value or in brackets.
var flagToken = regexp.MustCompile(`^\[?(--?[a-z][a-z0-9-]*)(=.*)?[\],.:]*$`)

func docFlag(tok string) string {
	m := flagToken.FindStringSubmatch(tok)
	if m == nil || strings.HasSuffix(tok, "...") || strings.HasSuffix(m[1], "-") {
		return ""
	}
	return m[1]
}

// hasFlag reports whether c takes the flag (-x or --name), its help too.
func hasFlag(c *cobra.Command, flag string) bool {
	c.InitDefaultHelpFlag()
	if name, ok := strings.CutPrefix(flag, "--"); ok {
		return c.Flags().Lookup(name) != nil || c.InheritedFlags().Lookup(name) != nil
	}
	short := strings.TrimPrefix(flag, "-")
	return len(short) == 1 && c.Flags().ShorthandLookup(short) != nil
}

// docSegments splits code into commands: at pipes, ;, &&, || and a
// comment (an escaped pipe, \| in a table, is text).
func docSegments(code string) [][]string {
	code = strings.ReplaceAll(code, `\|`, "/")
	var out [][]string
	for _, seg := range regexp.MustCompile(`\|\||&&| \| |[;&]|^#| #`).Split(code, -1) {
		if f := strings.Fields(seg); len(f) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// otherFlags are flags the documentation names alone that belong to other
// programs, and why they are named.
var otherFlags = map[string]string{
	"--creds":                 "the nats CLI's, which --nats-creds follows (docs/fleet.md)",
	"--tlsca":                 "the nats CLI's, which --nats-tls-ca follows (docs/fleet.md)",
	"--tlscert":               "the nats CLI's, which --nats-tls-cert follows (docs/fleet.md)",
	"--tlskey":                "the nats CLI's, which --nats-tls-key follows (docs/fleet.md)",
	"--remote-debugging-pipe": "Chromium's: the HTML report's browser test drives it (docs/postmortem.md)",
	"--behavior":              "lab-pair's and lab-ibpair's, the lab's applications (lab/progs)",
}

// sectionCommands names the command a section documents when its heading
// (or the heading above it) does not say apmwatch COMMAND.
var sectionCommands = map[string]string{
	"docs/postmortem.md#Recording":                                  "record",
	"docs/postmortem.md#Postmortem":                                 "postmortem",
	"docs/postmortem.md#From the fleet streams":                     "postmortem",
	"docs/postmortem.md#Both ends of a connection":                  "postmortem",
	"docs/postmortem.md#HTML":                                       "postmortem",
	"docs/hca-check.md#hca-check: what your HCA's firmware answers": "hca-check",
	"docs/recording.md#Recording format":                            "record",
}

var commandMention = regexp.MustCompile("(?:^|[\\s/(`*])apmwatch ([a-z][a-z-]*(?: [a-z][a-z-]*)?)")

// mentioned resolves the commands named in text (apmwatch X Y, or a code
// span that starts with a command's name).
func mentioned(root *cobra.Command, text string) []*cobra.Command {
	var out []*cobra.Command
	names := []string{}
	for _, m := range commandMention.FindAllStringSubmatch(text, -1) {
		names = append(names, m[1])
	}
	for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
		names = append(names, strings.TrimPrefix(m[1], "apmwatch "))
	}
	for _, n := range names {
		if c := resolve(root, strings.Fields(n)); c != root {
			out = append(out, c)
		}
	}
	return out
}

// resolve follows the leading words of args down the command tree.
func resolve(root *cobra.Command, args []string) *cobra.Command {
	c := root
	for _, a := range args {
		var next *cobra.Command
		for _, sub := range c.Commands() {
			if sub.Name() == a && sub.Name() != "help" {
				next = sub
			}
		}
		if next == nil {
			break
		}
		c = next
	}
	return c
}

// depth is how many words of args resolve names.
func depth(c *cobra.Command) int { return len(strings.Fields(c.CommandPath())) - 1 }

// sectionCommand is the command the section of c documents, or nil.
func sectionCommand(root *cobra.Command, c docCode) *cobra.Command {
	file := strings.TrimPrefix(c.file, "../../")
	for i := len(c.headings) - 1; i >= 0; i-- {
		h := c.headings[i]
		if i == 0 && sectionCommands[file+"#"+h] == "" {
			break // a page's title names what the page is about, not each section's command
		}
		if p, ok := sectionCommands[file+"#"+h]; ok {
			return resolve(root, strings.Fields(p))
		}
		for _, m := range commandMention.FindAllStringSubmatch(strings.ReplaceAll(h, "`", " "), -1) {
			if cmd := resolve(root, strings.Fields(strings.TrimRight(m[1], ":"))); cmd != root {
				return cmd
			}
		}
	}
	return nil
}

// docFlagProblems checks the flags README.md and docs/*.md name: after
// apmwatch COMMAND (or a command's name starting a code span), each must be
// a flag of that command; alone, a flag of the command the section
// documents (or one the same line names), else of some command, unless
// otherFlags lists it.
func docFlagProblems(t *testing.T, root *cobra.Command, files []string) (problems []string, checked int) {
	t.Helper()
	all := map[string]bool{}
	walk(root, func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { all["--"+f.Name] = true })
	})
	bad := func(c docCode, format string, a ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: ", strings.TrimPrefix(c.file, "../../"), c.line)+fmt.Sprintf(format, a...))
	}
	for _, file := range files {
		codes, paras := docCodes(t, file)
		for _, c := range codes {
			for _, seg := range docSegments(c.text) {
				at := -1 // where apmwatch COMMAND starts
				for i, tok := range seg {
					if (tok == "apmwatch" || strings.HasSuffix(tok, "/apmwatch")) && i+1 < len(seg) && resolve(root, seg[i+1:i+2]) != root {
						at = i + 1
						break
					}
				}
				if at < 0 && resolve(root, seg[:1]) != root {
					at = 0
				}
				if at >= 0 {
					cmd := resolve(root, seg[at:])
					for _, tok := range seg[at+depth(cmd):] {
						f := docFlag(tok)
						if f == "" {
							continue
						}
						checked++
						if !hasFlag(cmd, f) {
							bad(c, "%s has no %s: %q", cmd.CommandPath(), f, c.text)
						}
					}
					continue
				}
				if docFlag(seg[0]) == "" {
					continue // another program's command line
				}
				for _, tok := range seg {
					f := docFlag(tok)
					if f == "" || (!strings.HasPrefix(f, "--") && len(f) > 2) { // -test.v, -benchtime: go's
						continue
					}
					checked++
					if _, ok := otherFlags[f]; ok {
						continue
					}
					if sect := sectionCommand(root, c); sect != nil {
						cmds := append([]*cobra.Command{sect}, mentioned(root, paras[c.para])...)
						if !slices.ContainsFunc(cmds, func(x *cobra.Command) bool { return hasFlag(x, f) }) {
							bad(c, "%s (section %q) has no %s: %q", sect.CommandPath(), c.headings[len(c.headings)-1], f, paras[c.para])
						}
						continue
					}
					if !all[f] && !(len(f) == 2 && slices.ContainsFunc(root.Commands(), func(x *cobra.Command) bool { return hasFlag(x, f) })) {
						bad(c, "no command has %s: %q", f, paras[c.para])
					}
				}
			}
		}
	}
	return problems, checked
}

func docFiles(t *testing.T) []string {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(files) < 10 {
		t.Fatalf("docs: %v %v", files, err)
	}
	return append([]string{"../../README.md"}, files...)
}

// Every flag README.md, docs/*.md and the commands' examples (--help, the
// man pages) name exists where they say.
func TestDocFlagsExist(t *testing.T) {
	examples := "# Examples\n\n```sh\n"
	walk(newRootCmd(), func(c *cobra.Command) { examples += c.Example + "\n" })
	file := filepath.Join(t.TempDir(), "examples.md")
	if err := os.WriteFile(file, []byte(examples+"```\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	problems, checked := docFlagProblems(t, newRootCmd(), append(docFiles(t), file))
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("%d flags checked", checked)
	if checked < 300 {
		t.Errorf("only %d flags found in the docs: the reader misses them", checked)
	}
}

// The check fails on a flag no command has: after apmwatch COMMAND, alone
// in a command's section, alone anywhere; and on a flag of another command
// than the section's. Other programs' command lines are theirs.
func TestDocFlagCheckFails(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "x.md")
	text := "# Title\n\n## `apmwatch record`\n\n" +
		"Run `apmwatch trace --output json --no-such-flag` or `record -w f --rotate-size 1` (fine).\n\n" +
		"```sh\napmwatch qp list --device mlx5_0 --qpn 17 | jq .\nlab-pair --anything-goes\n```\n\n" +
		"The flag `--html FILE` is postmortem's, not record's.\n\n" +
		"## Elsewhere\n\nThe `--bogus` flag and `--creds` (the nats CLI's).\n"
	if err := os.WriteFile(doc, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	problems, checked := docFlagProblems(t, newRootCmd(), []string{doc})
	want := []string{"apmwatch trace has no --no-such-flag", "apmwatch qp list has no --qpn",
		"apmwatch record (section \"`apmwatch record`\") has no --html", "no command has --bogus"}
	if len(problems) != len(want) || checked != 9 {
		t.Fatalf("%d flags checked, problems:\n%s", checked, strings.Join(problems, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(problems[i], w) {
			t.Errorf("problem %d: %s, want %q", i, problems[i], w)
		}
	}
}
