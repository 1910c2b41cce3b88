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

// Values that cannot make sense are usage errors (exit 2) of one line; a
// directory given as a recording says so.
func TestBadValuesAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"trace", "--duration", "-1s"},
		{"trace", "--reconcile-interval", "-1s"},
		{"trace", "--reconcile-interval", "1ms"},
		{"trace", "--qpn", "0x1000000"},
		{"trace", "--pid", "0"},
		{"record", "-o", "x.rec", "--duration", "-5m"},
		{"record", "-o", "x.rec", "--qpn", "16777216"},
		{"record", "-o", "x.rec", "--rotate-size", "-1"},
		{"record", "-o", "x.rec", "--rotate-keep", "3"},
		{"postmortem", "--qpn", "99999999", "x.rec"},
		{"postmortem", "--max-entries", "0", "x.rec"},
		{"postmortem", "--max-qps", "-1", "x.rec"},
		{"qp", "list", "--pid", "0"},
		{"qp", "list", "--pid", "-4"},
		{"qp", "show", "--qpn", "16777216"},
		{"actuate", "query", "--pid", "0", "--qpn", "17"},
		{"actuate", "query", "--pid", "-1", "--qpn", "17"},
		{"actuate", "rearm", "--pid", "100", "--qpn", "16777216"},
	} {
		_, err := run(args...)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("%v: want a usage error (exit 2), got %v", args, err)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || msg != strings.ToLower(msg[:1])+msg[1:] {
			t.Errorf("%v: %q is not one lowercase line", args, msg)
		}
	}
	dir := t.TempDir()
	_, err := run("postmortem", dir)
	if err == nil || !strings.Contains(err.Error(), "is a directory, not a recording") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("postmortem DIR: %v", err)
	}
}

// --since and --until say which way they count: +D after the first event
// of recordings, -D before now; +D with --nats (no first event) is a usage
// error, and a bare duration keeps its old meaning with a warning naming
// the explicit form.
func TestPostmortemTimeBoundsSaySign(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.rec")
	w, err := recording.Create(path, event.Meta{Host: "h"}, recording.Options{FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	for _, c := range []struct {
		args []string
		warn string
	}{
		{[]string{"postmortem", "--since", "+30s", path}, ""},
		{[]string{"postmortem", "--since", "-1h", path}, ""},
		{[]string{"postmortem", "--since", "30s", path}, "reads as +30s (after the first event)"},
	} {
		cmd := newRootCmd()
		var out, errb bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errb)
		cmd.SetArgs(c.args)
		if err := cmd.Execute(); err != nil {
			t.Errorf("%v: %v", c.args, err)
		}
		// (an empty recording: that nothing matches the window is said too)
		if c.warn == "" && strings.Contains(errb.String(), "reads as") || !strings.Contains(errb.String(), c.warn) {
			t.Errorf("%v: stderr %q, want %q", c.args, errb.String(), c.warn)
		}
	}
	_, err = run("postmortem", "--nats", "nats://127.0.0.1:1", "--since", "+30s")
	if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "counts from the first event") {
		t.Errorf("--nats --since +30s: %v", err)
	}
}
