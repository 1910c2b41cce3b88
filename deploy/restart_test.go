package deploy

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// unitKeys reads KEY=VALUE lines of a unit file (the last of a key wins,
// as systemd reads them).
func unitKeys(t *testing.T, file string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z]+)=(.*)$`).FindAllStringSubmatch(string(b), -1) {
		keys[m[1]] = m[2]
	}
	return keys
}

// A unit that fails does not restart forever: starts are limited, a
// configuration error (exit status 2: a bad flag, flag value or --policy)
// is never restarted, and the audit unit is skipped on a host without
// ib_core rather than started to fail.
func TestUnitsDoNotRestartForever(t *testing.T) {
	for _, unit := range []string{"apmwatch-audit.service", "apmwatch-fleet.service"} {
		k := unitKeys(t, unit)
		if k["StartLimitIntervalSec"] == "" || k["StartLimitBurst"] == "" {
			t.Errorf("%s: no start limit: StartLimitIntervalSec=%q StartLimitBurst=%q", unit, k["StartLimitIntervalSec"], k["StartLimitBurst"])
		}
		if k["RestartPreventExitStatus"] != "2" {
			t.Errorf("%s: RestartPreventExitStatus=%q, want 2 (a configuration error)", unit, k["RestartPreventExitStatus"])
		}
	}
	if k := unitKeys(t, "apmwatch-audit.service"); k["ConditionPathExists"] != "/sys/module/ib_core" {
		t.Errorf("apmwatch-audit.service: ConditionPathExists=%q, want /sys/module/ib_core", k["ConditionPathExists"])
	}
	// The exit status the units count on: a configuration error is 2.
	bin := filepath.Join(t.TempDir(), "apmwatch")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/apmwatch").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	empty := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(empty, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"audit", "--policy", filepath.Join(t.TempDir(), "missing.json")},
		{"audit", "--policy", empty},
		{"audit", "--no-such-flag"},
		{"fleet", "--no-such-flag"},
	} {
		err := exec.Command(bin, args...).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("apmwatch %v: %v, want exit status 2", args, err)
		}
	}
}
