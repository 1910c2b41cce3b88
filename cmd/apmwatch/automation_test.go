package main

import (
	"bytes"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func runBoth(args ...string) (stdout, stderr string, err error) {
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errb.String(), err
}

var exampleRec = func(name string) string { return filepath.Join("..", "..", "examples", name) }

// --fail-on: exit 3 once the report is written when a finding shown is of
// that severity or worse; 0 below it; a bad severity is a usage error.
func TestPostmortemFailOn(t *testing.T) {
	unprotected := exampleRec("ib-unprotected-failure.rec") // missed-rearm (error), unprotected-failure (critical)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"postmortem", "--fail-on", "critical", unprotected}, exitFindings},
		{[]string{"postmortem", "--fail-on", "error", "-o", "json", unprotected}, exitFindings},
		{[]string{"postmortem", "--fail-on", "warning", exampleRec("ib-correct.rec")}, 0},
		{[]string{"postmortem", "--fail-on", "critical", exampleRec("ib-lap-race.rec")}, 0},
		{[]string{"postmortem", "--fail-on", "fatal", unprotected}, exitUsage},
		{[]string{"postmortem", "--fail-on", "error", "--nats", "nats://127.0.0.1:1", "--since", "-1h"}, exitUsage},
	} {
		out, _, err := runBoth(c.args...)
		code := 0
		if err != nil {
			code = exitCode(err)
		}
		if code != c.code {
			t.Errorf("%v: exit %d (%v), want %d", c.args, code, err, c.code)
		}
		if c.code == exitFindings && !strings.Contains(err.Error(), "--fail-on") {
			t.Errorf("%v: %v does not say why", c.args, err)
		}
		if c.code == exitFindings && !strings.Contains(out, "unprotected-failure") {
			t.Errorf("%v: the report is not written before the exit status:\n%s", c.args, out)
		}
	}
}

// A filter that matches nothing says so on stderr; an inverted window is
// a usage error.
func TestPostmortemEmptyFilterSaysSo(t *testing.T) {
	rec := exampleRec("ib-correct.rec")
	_, stderr, err := runBoth("postmortem", "--device", "nosuch", rec)
	if err != nil || !strings.Contains(stderr, "--device nosuch: no QP of the recordings is on this device") {
		t.Errorf("--device nosuch: %v, stderr %q", err, stderr)
	}
	_, stderr, err = runBoth("postmortem", "--device", "ibsim0", rec)
	if err != nil || stderr != "" {
		t.Errorf("--device ibsim0: %v, stderr %q", err, stderr)
	}
	for _, w := range [][]string{{"+10m", "+1s"}, {"2026-12-03T22:40:00Z", "+1s"}} {
		_, _, err = runBoth("postmortem", "--since", w[0], "--until", w[1], rec)
		if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "--until is before --since") {
			t.Errorf("--since %s --until %s: %v", w[0], w[1], err)
		}
	}
}

// help of an unknown topic is a usage error; of a known one, the help.
func TestHelpUnknownTopic(t *testing.T) {
	for _, args := range [][]string{{"help", "nonsense"}, {"help", "fleet", "nonsense"}} {
		if _, _, err := runBoth(args...); err == nil || exitCode(err) != exitUsage {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	out, _, err := runBoth("help", "postmortem")
	if err != nil || !strings.Contains(out, "--fail-on") {
		t.Errorf("help postmortem: %v\n%s", err, out)
	}
}

// --version prints what the version command prints.
func TestVersionFlag(t *testing.T) {
	flag, _, err := runBoth("--version")
	if err != nil {
		t.Fatal(err)
	}
	cmd, _, err := runBoth("version")
	if err != nil {
		t.Fatal(err)
	}
	if flag != cmd || !strings.HasPrefix(flag, "apmwatch ") {
		t.Errorf("--version %q, version %q", flag, cmd)
	}
}

// fleet status --fail-on: exit 3 once the status is written when a
// connection shown is of that severity or worse (one-sided: error).
func TestFleetStatusFailOn(t *testing.T) {
	url := fleettest.NATS(t)
	js := fleettest.JS(t, url)
	m := fleettest.T0.Add(time.Second)
	a, b := fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
	a, b = fleettest.Migrated(a, m), fleettest.Migrated(b, m)
	a = fleettest.Rearmed(a, m.Add(100*time.Millisecond))
	fleettest.Store(t, js, a, b)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"fleet", "status", "--nats", url}, 0},
		{[]string{"fleet", "status", "--nats", url, "--fail-on", "error"}, exitFindings},
		{[]string{"fleet", "status", "--nats", url, "--fail-on", "warning", "-o", "json"}, exitFindings},
		{[]string{"fleet", "status", "--nats", url, "--fail-on", "critical"}, 0},
		{[]string{"fleet", "status", "--nats", url, "--fail-on", "fatal"}, exitUsage},
	} {
		out, _, err := runBoth(c.args...)
		code := 0
		if err != nil {
			code = exitCode(err)
		}
		if code != c.code {
			t.Errorf("%v: exit %d (%v), want %d\n%s", c.args, code, err, c.code, out)
		}
		if c.code == exitFindings && (!strings.Contains(err.Error(), "--fail-on") || !strings.Contains(out, "one-sided")) {
			t.Errorf("%v: %v; the status written first:\n%s", c.args, err, out)
		}
	}
}
