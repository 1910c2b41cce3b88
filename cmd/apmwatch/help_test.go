package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// Every command's --help fits an 80-column terminal: the prose reflowed,
// the flags' usages wrapped, the examples and command lists written short.
func TestHelpFits80Columns(t *testing.T) {
	var walk func(path []string, c *cobra.Command)
	n := 0
	walk = func(path []string, c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			walk(append(append([]string{}, path...), sub.Name()), sub)
		}
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(append([]string{}, path...), "--help"))
		if err := root.Execute(); err != nil {
			t.Errorf("%v --help: %v", path, err)
			return
		}
		n++
		for _, line := range strings.Split(out.String(), "\n") {
			if w := utf8.RuneCountInString(line); w > 80 {
				t.Errorf("apmwatch %s --help: a line of %d columns:\n%s", strings.Join(path, " "), w, line)
			}
		}
	}
	walk(nil, newRootCmd())
	if n < 15 {
		t.Errorf("checked %d commands' help: want every command", n)
	}
}
