package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/recording"
	"github.com/spf13/cobra"
)

func run(args ...string) (string, error) {
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// The commands that run the model take the same thresholds.
func TestModelFlagsOnEveryModelCommand(t *testing.T) {
	for _, c := range []*cobra.Command{newTraceCmd(), newPostmortemCmd(), newAuditCmd()} {
		for _, name := range []string{"rearm-deadline", "stuck-rearm", "truth-grace", "reorder-window", "max-qps"} {
			if c.Flags().Lookup(name) == nil {
				t.Errorf("%s has no --%s", c.Name(), name)
			}
		}
	}
}

func TestRecordAndPostmortemUsage(t *testing.T) {
	for _, args := range [][]string{
		{"postmortem"},
		{"postmortem", "--output", "yaml", "x.rec"},
		{"postmortem", "--since", "yesterday", "x.rec"},
		{"postmortem", "--qpn", "abc", "x.rec"},
		{"postmortem", "--rearm-deadline", "0s", "x.rec"},
		{"audit", "--findings", "/tmp/x", "--rearm-deadline", "0s"},
		{"audit", "--findings", "/tmp/x", "--flap-count", "-1"},
		{"record"},
		{"record", "-o", "x.rec", "--qpn", "abc"},
	} {
		if _, err := run(args...); err == nil || exitCode(err) != 2 {
			t.Errorf("%v: want a usage error (exit 2), got %v", args, err)
		}
	}
}

func TestPostmortemCommand(t *testing.T) {
	dir := t.TempDir()
	if _, err := run("postmortem", filepath.Join(dir, "missing.rec")); err == nil || exitCode(err) != 1 ||
		!strings.HasPrefix(err.Error(), "opening recording: ") {
		t.Fatalf("missing file: %v", err)
	}
	path := filepath.Join(dir, "a.rec")
	w, err := recording.Create(path, event.Meta{Host: "h"}, recording.Options{FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(&event.Event{Seq: 1, Kind: event.KindQPCreate, Boot: 1e9, Device: "rxe0", QPN: 17,
		Life: &event.QPLife{QPType: event.QPTypeRC}})
	w.Close()
	out, err := run("postmortem", "--all", "--html", filepath.Join(dir, "r.html"), path)
	if err != nil || !strings.Contains(out, "summary: 1 events") || !strings.Contains(out, "qp: h/rxe0/17#1") {
		t.Fatalf("postmortem: %v\n%s", err, out)
	}
	out, err = run("postmortem", "-o", "json", path)
	if err != nil || !strings.HasPrefix(out, "{") {
		t.Fatalf("postmortem -o json: %v\n%s", err, out)
	}
}
