package package_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// lint runs a package linter: each error fails the test, each warning is
// listed. The overrides (deploy/package/lintian-overrides, installed in the
// .deb) and filters (rpmlint.toml) say why they are there.
func lint(t *testing.T, name string, args ...string) {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	errs := 0
	for _, l := range strings.Split(out.String(), "\n") {
		switch {
		case strings.HasPrefix(l, "E: ") || strings.Contains(l, ": E: "):
			t.Errorf("%s: %s", name, l)
			errs++
		case strings.HasPrefix(l, "W: ") || strings.Contains(l, ": W: "):
			t.Logf("%s: warning (allowed): %s", name, l)
		}
	}
	if err != nil && errs == 0 {
		t.Errorf("%s: %v, yet no error line:\n%s", name, err, out.String())
	}
}

func checkLint(t *testing.T, deb, rpm string) {
	t.Run("lintian", func(t *testing.T) { lint(t, "lintian", "--fail-on", "error", deb) })
	t.Run("rpmlint", func(t *testing.T) { lint(t, "rpmlint", "-c", "rpmlint.toml", rpm) })
}
