package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestTraceBadInputIsUsageError(t *testing.T) {
	for _, args := range [][]string{
		{"trace", "--kind", "modfy"},
		{"trace", "--qpn", "seventeen"},
		{"trace", "--pid", "-3"},
		{"trace", "--output", "yaml"},
		{"trace", "--flap-count", "1"},
		{"trace", "--kind", "missed-rearm,modfy"},
		{"trace", "extra-arg"},
		{"probes", "--nope"},
	} {
		cmd := newRootCmd()
		var errb bytes.Buffer
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&errb)
		cmd.SetArgs(args)
		err := cmd.Execute()
		if err == nil {
			t.Errorf("%v: accepted", args)
			continue
		}
		if exitCode(err) != 2 {
			t.Errorf("%v: exit %d (%v), want 2", args, exitCode(err), err)
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || msg != strings.ToLower(msg[:1])+msg[1:] {
			t.Errorf("%v: error %q is not one lowercase line", args, msg)
		}
	}
}
