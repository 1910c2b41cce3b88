package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func runErr(args ...string) (stdout, stderr string, err error) {
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errb.String(), err
}

// walk calls f for every command of the tree but cobra's own help.
func walk(c *cobra.Command, f func(*cobra.Command)) {
	if c.Name() != "help" {
		f(c)
	}
	for _, s := range c.Commands() {
		walk(s, f)
	}
}

// One argument too many is a usage error (exit 2) on every command.
func TestExtraArgumentsAreUsageErrors(t *testing.T) {
	n := 0
	walk(newRootCmd(), func(c *cobra.Command) {
		args := strings.Fields(c.CommandPath())[1:]
		// Commands that take arguments get theirs, plus one.
		switch c.CommandPath() {
		case "apmwatch actuate":
			args = append(args, "query")
		case "apmwatch actuate policy-check":
			args = append(args, "p.json")
		case "apmwatch postmortem":
			return // takes any number of files
		}
		args = append(args, "surplus")
		_, _, err := runErr(args...)
		if err == nil || exitCode(err) != 2 || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v (exit %d), want a one-line usage error", args, err, exitCode(err))
		}
		n++
	})
	if n < 12 {
		t.Fatalf("walked %d commands", n)
	}
}

// -o/--output table|json on every command that prints something to read;
// -o wide too on those that print a table.
func TestOutputFlagEverywhere(t *testing.T) {
	wide := map[string]bool{"trace": true, "probes": true, "postmortem": true, "qp list": true, "qp show": true,
		"hca-check": true, "fleet status": true, "routes": true}
	for _, path := range []string{"trace", "probes", "postmortem", "qp list", "qp show", "actuate", "version", "hca-check", "fleet status", "routes"} {
		cmd, _, err := newRootCmd().Find(strings.Fields(path))
		if err != nil {
			t.Fatal(err)
		}
		f := cmd.Flags().Lookup("output")
		if f == nil || f.Shorthand != "o" || f.DefValue != "table" || !strings.HasPrefix(f.Usage, "table or json") {
			t.Errorf("%s: --output %+v, want -o, default table, table or json", path, f)
		}
		want := "want table or json"
		if wide[path] {
			want = "want table, wide or json"
			if !slices.Contains(formatsOf(cmd), "wide") || !strings.Contains(f.Usage, "wide: the table in full") {
				t.Errorf("%s: no -o wide: %q", path, f.Usage)
			}
		} else if slices.Contains(formatsOf(cmd), "wide") {
			t.Errorf("%s takes -o wide and prints no table", path)
		}
		args := append(strings.Fields(path), "-o", "yaml")
		switch path {
		case "postmortem":
			args = append(args, "x.rec")
		case "actuate":
			args = append(args, "query", "--pid", "1", "--qpn", "1")
		case "hca-check":
			args = append(args, "--dev", "ibsim0")
		}
		if _, _, err := runErr(args...); err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// The old spellings work and warn.
func TestDeprecatedSpellings(t *testing.T) {
	out, errs, err := runErr("version", "--json")
	if err != nil || !strings.HasPrefix(out, "{") || !strings.Contains(errs, "deprecated") {
		t.Errorf("version --json: %v %q %q", err, out, errs)
	}
	out, errs, err = runErr("version", "-o", "text")
	if err != nil || strings.HasPrefix(out, "{") || !strings.Contains(errs, "-o text is deprecated, use -o table") {
		t.Errorf("version -o text: %v %q %q", err, out, errs)
	}
	_, errs, err = runErr("record", "-o", "x.rec", "--qpn", "abc")
	if err == nil || exitCode(err) != 2 || !strings.Contains(errs, "use -w/--write FILE") {
		t.Errorf("record -o: %v %q, want the deprecation warning and the --qpn usage error", err, errs)
	}
	_, _, err = runErr("record", "--qpn", "1")
	if err == nil || exitCode(err) != 2 || err.Error() != "no recording file: give -w FILE" {
		t.Errorf("record without -w: %v", err)
	}
	probes, _, _ := newRootCmd().Find([]string{"probes"})
	if f := probes.Flags().Lookup("json"); f == nil || !f.Hidden || len(f.Annotations[deprecatedKey]) != 1 {
		t.Errorf("probes --json: %+v, want a hidden deprecated alias", f)
	}
}

func TestCompletionCompletesSubcommands(t *testing.T) {
	out, _, err := runErr("__complete", "q")
	if err != nil || !strings.Contains(out, "qp\t") {
		t.Fatalf("completion of q: %v %q", err, out)
	}
	out, _, err = runErr("completion", "bash")
	if err != nil || !strings.Contains(out, "__start_apmwatch") {
		t.Fatalf("completion bash: %v", err)
	}
}

// The filter flags come from one helper: the commands that filter take the
// same flags, and a bad value is a usage error on each.
func TestFilterFlags(t *testing.T) {
	for path, flags := range map[string][]string{
		"trace":      {"device", "qpn", "pid", "comm", "kind"},
		"record":     {"device", "qpn", "pid", "comm", "kind"},
		"postmortem": {"device", "qpn"},
	} {
		cmd, _, _ := newRootCmd().Find([]string{path})
		for _, f := range flags {
			if cmd.Flags().Lookup(f) == nil {
				t.Errorf("%s has no --%s", path, f)
			}
		}
		args := []string{path, "--qpn", "x"}
		if path == "postmortem" {
			args = append(args, "a.rec")
		}
		if _, _, err := runErr(args...); err == nil || exitCode(err) != 2 {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
