package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/actuator"
	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/spf13/cobra"
)

// complete runs cobra's __complete (what the shell scripts call) and
// returns the values offered, without descriptions, and the directive line.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	out, _, err := runErr(append([]string{cobra.ShellCompRequestCmd}, args...)...)
	if err != nil {
		t.Fatalf("__complete %q: %v", args, err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var vals []string
	for _, l := range lines[:len(lines)-1] {
		v, _, _ := strings.Cut(l, "\t")
		vals = append(vals, v)
	}
	return vals, lines[len(lines)-1]
}

const noFiles = ":4" // cobra.ShellCompDirectiveNoFileComp

// -o completes with exactly the formats each command takes, and each
// value offered is accepted by the command.
func TestCompleteOutput(t *testing.T) {
	n := 0
	walk(newRootCmd(), func(c *cobra.Command) {
		f := c.Flags().Lookup("output")
		if f == nil || f.Hidden || len(f.Annotations[deprecatedKey]) > 0 {
			return
		}
		path := strings.Fields(c.CommandPath())[1:]
		got, dir := complete(t, append(slices.Clone(path), "-o", "")...)
		want := formatsOf(c)
		if !slices.Equal(got, want) || dir != noFiles {
			t.Errorf("%v -o: %v %s, want %v without files", path, got, dir, want)
		}
		for _, v := range got {
			if _, err := outputFormat(c, v); err != nil {
				t.Errorf("%v -o %s offered, refused: %v", path, v, err)
			}
		}
		n++
	})
	if n < 8 {
		t.Fatalf("only %d commands with -o", n)
	}
	if got, _ := complete(t, "version", "--output", "j"); !slices.Equal(got, []string{"json"}) {
		t.Errorf("version --output j: %v", got)
	}
	if got, _ := complete(t, "qp", "list", "--output", "w"); !slices.Equal(got, []string{"wide"}) {
		t.Errorf("qp list --output w: %v", got)
	}
}

// --kind: event kinds everywhere; on trace, which runs the model, also
// "finding" and every finding kind of the registry. One value of a list
// completes after the ones already typed, without repeating them.
func TestCompleteKind(t *testing.T) {
	var events, findings []string
	for _, k := range event.Kinds() {
		events = append(events, k.String())
	}
	findings = append(findings, "finding")
	for _, k := range apm.Registry() {
		findings = append(findings, string(k.Kind))
	}
	if got, dir := complete(t, "record", "--kind", ""); !slices.Equal(got, events) || dir != noFiles {
		t.Errorf("record --kind: %v %s, want %v", got, dir, events)
	}
	got, _ := complete(t, "trace", "--kind", "")
	if want := append(slices.Clone(events), findings...); !slices.Equal(got, want) {
		t.Errorf("trace --kind: %v, want %v", got, want)
	}
	for _, v := range got { // every value offered parses
		if _, _, err := runErr("trace", "--kind", v, "--duration", "-1s"); err == nil || strings.Contains(err.Error(), "--kind") {
			t.Errorf("trace --kind %s: %v", v, err)
		}
	}
	got, _ = complete(t, "trace", "--kind", "modify,qp-")
	if want := []string{"modify,qp-event", "modify,qp-create", "modify,qp-destroy", "modify,qp-truth"}; !slices.Equal(got, want) {
		t.Errorf("trace --kind modify,qp-: %v, want %v", got, want)
	}
	got, _ = complete(t, "trace", "--kind", "missed-rearm,m")
	if slices.Contains(got, "missed-rearm,missed-rearm") || !slices.Contains(got, "missed-rearm,mig-state-mismatch") ||
		!slices.Contains(got, "missed-rearm,modify") {
		t.Errorf("trace --kind missed-rearm,m: %v", got)
	}
}

// --device and hca-check's --dev complete with the RDMA devices of this
// host, read when completing; postmortem's does not (its recordings come
// from other hosts).
func TestCompleteDevice(t *testing.T) {
	dir := t.TempDir()
	defer func(d string) { sysInfiniband = d }(sysInfiniband)
	sysInfiniband = dir
	for _, d := range []string{"ibsim0", "mlx5_0"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	devs := []string{"ibsim0", "mlx5_0"}
	for _, args := range [][]string{
		{"trace", "--device", ""}, {"record", "--device", ""}, {"audit", "--device", ""}, {"qp", "list", "--device", ""},
		{"qp", "show", "--device", ""}, {"actuate", "--device", ""}, {"hca-check", "--dev", ""},
	} {
		if got, d := complete(t, args...); !slices.Equal(got, devs) || d != noFiles {
			t.Errorf("%v: %v %s, want %v", args, got, d, devs)
		}
	}
	if got, _ := complete(t, "trace", "--device", "ibsim0,"); !slices.Equal(got, []string{"ibsim0,mlx5_0"}) {
		t.Errorf("trace --device ibsim0,: %v", got)
	}
	if got, _ := complete(t, "hca-check", "--dev", "m"); !slices.Equal(got, []string{"mlx5_0"}) {
		t.Errorf("hca-check --dev m: %v", got)
	}
	if got, _ := complete(t, "postmortem", "--device", ""); len(got) != 0 {
		t.Errorf("postmortem --device: %v, want none of this host's", got)
	}
	// A new device is seen at the next completion.
	if err := os.Mkdir(filepath.Join(dir, "mlx5_1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, _ := complete(t, "qp", "list", "--device", "mlx5"); !slices.Equal(got, []string{"mlx5_0", "mlx5_1"}) {
		t.Errorf("after adding mlx5_1: %v", got)
	}
}

// actuate's argument completes with every operation it takes (and its
// policy-check subcommand); nothing after the operation.
func TestCompleteActuate(t *testing.T) {
	got, dir := complete(t, "actuate", "")
	ops := got[slices.Index(got, "policy-check")+1:]
	if !slices.Contains(got, "policy-check") || len(ops) != 4 || dir != noFiles {
		t.Fatalf("actuate: %v %s", got, dir)
	}
	for _, o := range ops {
		if _, err := actuator.ParseOp(o); err != nil {
			t.Errorf("actuate offers %q: %v", o, err)
		}
	}
	for _, o := range []actuator.Op{actuator.OpQuery, actuator.OpLoadAlt, actuator.OpRearm, actuator.OpMigrate} {
		if !slices.Contains(ops, string(o)) {
			t.Errorf("actuate does not offer %s: %v", o, ops)
		}
	}
	if got, _ := complete(t, "actuate", "re"); !slices.Equal(got, []string{"rearm"}) {
		t.Errorf("actuate re: %v", got)
	}
	if got, _ := complete(t, "actuate", "query", ""); len(got) != 0 {
		t.Errorf("actuate query: %v, want nothing more", got)
	}
}
