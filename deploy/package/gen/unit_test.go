package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The packages' units run the packaged binary: every ExecStart of the
// units in deploy/ is rewritten, nothing else is.
func TestRenderUnit(t *testing.T) {
	for _, u := range []string{"apmwatch-audit.service", "apmwatch-fleet.service"} {
		src, err := os.ReadFile(filepath.Join("..", "..", u))
		if err != nil {
			t.Fatal(err)
		}
		got, err := renderUnit(src, "/usr/bin/apmwatch")
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		for _, l := range strings.Split(string(got), "\n") {
			if strings.HasPrefix(l, "ExecStart=") && !strings.HasPrefix(l, "ExecStart=/usr/bin/apmwatch ") {
				t.Errorf("%s: %s", u, l)
			}
		}
		if !strings.Contains(string(got), "\nExecStart=/usr/bin/apmwatch ") {
			t.Errorf("%s: no ExecStart of /usr/bin/apmwatch:\n%s", u, got)
		}
		head, rest, _ := strings.Cut(string(got), "\n")
		if !strings.HasPrefix(head, "# ") || strings.ReplaceAll(rest, "ExecStart=/usr/bin/apmwatch", "ExecStart="+sourceBin) != string(src) {
			t.Errorf("%s: more changed than ExecStart and a comment", u)
		}
	}
	if _, err := renderUnit([]byte("[Service]\nExecStart=/opt/x\n"), "/usr/bin/apmwatch"); err == nil {
		t.Error("a unit without the source binary's ExecStart was rendered")
	}
}
