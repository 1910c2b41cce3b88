package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"testing"
)

func TestVersionJSON(t *testing.T) {
	for _, args := range [][]string{{"version", "-o", "json"}, {"version", "--json"}} {
		cmd := newRootCmd()
		var out, errb bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errb)
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		var v struct{ Version, Commit, Go string }
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatalf("%v is not JSON: %v: %q", args, err, out.String())
		}
		if v.Go != runtime.Version() || v.Version == "" || v.Commit == "" {
			t.Fatalf("incomplete version info: %+v", v)
		}
	}
}

func TestWrongFlagIsUsageError(t *testing.T) {
	cmd := newRootCmd()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"version", "--no-such-flag"})
	err := cmd.Execute()
	if err == nil || exitCode(err) != 2 {
		t.Fatalf("want a usage error with exit code 2, got %v", err)
	}
}

// An error quoting a host string stays one line without control bytes.
func TestFailIsOneEscapedLine(t *testing.T) {
	var b bytes.Buffer
	code := fail(&b, usageError{errors.New("bad --comm \"\x1b[2J\r\nforged\"")})
	if code != 2 || b.String() != "apmwatch: bad --comm \"\\x1b[2J\\x0d\\x0aforged\"\n" {
		t.Fatalf("exit %d, %q", code, b.String())
	}
}
