//go:build labguest

// `apmwatch audit --policy P --enforce` from the command line: the same
// enforcer as TestAuditEnforceRearms, but through the CLI flags a user types.
package guest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/actuator"
)

func startAuditCLI(t *testing.T, mode string, extra ...string) string {
	t.Helper()
	path, _ := startAuditCLIProc(t, mode, extra...)
	return path
}

// writePolicy writes pol as dir/policy.json and returns its path.
func writePolicy(t *testing.T, dir string, pol actuator.Policy) string {
	t.Helper()
	b, err := json.Marshal(pol)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func startAuditCLIProc(t *testing.T, mode string, extra ...string) (string, *Proc) {
	t.Helper()
	dir := t.TempDir()
	policy := writePolicy(t, dir, labPolicy(mode))
	findings := filepath.Join(dir, "findings.jsonl")
	ready := filepath.Join(dir, "ready")
	args := append([]string{"audit", "--findings", findings, "--metrics-addr", "",
		"--reconcile-interval", "0", "--rearm-deadline", enforceDeadline.String(),
		"--ready-file", ready, "--policy", policy}, append(extra, labHooks(t)...)...)
	a := Start(t, "apmwatch", args...)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			return findings, a
		}
		if time.Now().After(deadline) || a.exited() {
			t.Fatalf("apmwatch audit not ready:\n%s", a.Dump())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAuditCLIEnforceRearms(t *testing.T) {
	log := startAuditCLI(t, actuator.ModeMonitor, "--enforce")
	p, pid, qpn := migratedPair(t)
	waitKind(t, log, string(actuator.KindActuated), qpn, 1)
	if got := ownerView(t, p, pid, qpn); got != "REARM" {
		t.Fatalf("after apmwatch audit --enforce the owner reads %s, want REARM", got)
	}
}

// Without --enforce a policy file only says what it would do.
func TestAuditCLIPolicyWithoutEnforceOnlyMonitors(t *testing.T) {
	log := startAuditCLI(t, actuator.ModeMonitor)
	p, pid, qpn := migratedPair(t)
	waitKind(t, log, string(actuator.KindWouldActuate), qpn, 1)
	if got := ownerView(t, p, pid, qpn); got != "MIGRATED" {
		t.Fatalf("monitor mode changed the QP: the owner reads %s, want MIGRATED", got)
	}
}

// --enforce is the one switch: a policy file saying "enforce" without it
// only monitors, and apmwatch says so.
func TestActuatorCLIPolicyFileCannotEnforce(t *testing.T) {
	log, a := startAuditCLIProc(t, actuator.ModeEnforce)
	p, pid, qpn := migratedPair(t)
	waitKind(t, log, string(actuator.KindWouldActuate), qpn, 1)
	if got := ownerView(t, p, pid, qpn); got != "MIGRATED" {
		t.Fatalf("a policy file saying enforce changed the QP without --enforce: the owner reads %s, want MIGRATED", got)
	}
	if !strings.Contains(a.Stderr(), "--enforce was not given: monitor mode") {
		t.Errorf("no warning on stderr:\n%s", a.Stderr())
	}
}
