package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// Every apmwatch command the runbooks (docs/runbooks.md) tell an operator
// to run names a command that exists, with flags it takes: pasted, it does
// what the runbook says (its --help runs; each --flag is the command's).
// Placeholders (FILE, PID, ...) are upper case. (TestRunbookCommands)
func TestRunbookCommands(t *testing.T) {
	b, err := os.ReadFile("../../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	spans := regexp.MustCompile("`(apmwatch\\s[^`]+)`").FindAllStringSubmatch(string(b), -1)
	if len(spans) < 10 {
		t.Fatalf("%d apmwatch commands in the runbooks: the pattern is wrong", len(spans))
	}
	for _, m := range spans {
		words := strings.Fields(m[1])[1:]
		var path, flags []string
		for _, w := range words {
			switch {
			case strings.HasPrefix(w, "--"):
				flags = append(flags, strings.SplitN(strings.TrimPrefix(w, "--"), "=", 2)[0])
			case len(flags) == 0 && w != "" && unicode.IsLower(rune(w[0])):
				path = append(path, w)
			}
		}
		root := newRootCmd()
		c, rest, err := root.Find(path)
		if err == nil && len(rest) > 0 && c.Args != nil {
			err = c.Args(c, rest) // an operation named by an argument (actuate rearm)
			if err == nil && c.ValidArgsFunction != nil {
				ops, _ := c.ValidArgsFunction(c, nil, "")
				for i, o := range ops {
					ops[i], _, _ = strings.Cut(o, "\t") // a completion's description
				}
				if !slices.Contains(ops, rest[0]) {
					err = fmt.Errorf("%s is none of %v", rest[0], ops)
				}
			}
		}
		if err != nil || c == root || len(rest) > 0 && c.Args == nil {
			t.Errorf("runbook command %q: no such command (%v, left %v)", m[1], err, rest)
			continue
		}
		for _, f := range flags {
			if c.Flags().Lookup(f) == nil && c.InheritedFlags().Lookup(f) == nil {
				t.Errorf("runbook command %q: %s has no --%s", m[1], c.CommandPath(), f)
			}
		}
		if _, _, err := runBoth(append(path, "--help")...); err != nil {
			t.Errorf("runbook command %q: --help: %v", m[1], err)
		}
	}
}
