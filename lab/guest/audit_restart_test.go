//go:build labguest

// `apmwatch audit` restarted on its own finding log and flight recorder:
// what was open stays open (audit/restore.go, docs/audit.md "Restarts").
package guest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/actuator"
)

// auditIn starts `apmwatch audit` on dir's finding log and flight
// recorder and waits until its probes are attached.
func auditIn(t *testing.T, dir string, deadline time.Duration, extra ...string) *Proc {
	t.Helper()
	ready := filepath.Join(dir, "ready")
	os.Remove(ready)
	args := append([]string{"audit", "--findings", filepath.Join(dir, "findings.jsonl"), "--recorder-dir", filepath.Join(dir, "rec"),
		"--metrics-addr", "", "--reconcile-interval", "0", "--rearm-deadline", deadline.String(), "--ready-file", ready},
		append(extra, labHooks(t)...)...)
	a := Start(t, "apmwatch", args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("apmwatch audit %v:\n%s", extra, a.Stderr())
		}
	})
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return a
		}
		if time.Now().After(end) || a.exited() {
			t.Fatalf("apmwatch audit not ready:\n%s", a.Dump())
		}
	}
}

// restartLine is what these tests read of a finding line.
type restartLine struct {
	Type      string `json:"type"`
	ID        uint64 `json:"id"`
	Kind      string `json:"kind"`
	Resolves  uint64 `json:"resolves"`
	Uncertain string `json:"uncertain"`
	BootID    string `json:"boot_id"`
	QP        struct {
		QPN int64 `json:"qpn"`
	} `json:"qp"`
	Evidence []struct {
		What string `json:"what"`
	} `json:"evidence"`
}

// linesOf reads the finding log's lines about qpn.
func linesOf(t *testing.T, path string, qpn int64) []restartLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []restartLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l restartLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.QP.QPN == qpn {
			out = append(out, l)
		}
	}
	return out
}

// A missed rearm judged, then the daemon restarted with the enforcer: the
// finding is not written again (it is open under its ID), the restarted
// daemon rearms the QP under its policy, and the rearm its probes see
// resolves the ID the first run wrote.
func TestAuditRestartKeepsAMissedRearmAndEnforces(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "findings.jsonl")
	a := auditIn(t, dir, enforceDeadline)
	p, pid, qpn := migratedPair(t)
	f := waitKind(t, log, "missed-rearm", qpn, 1)
	if err := a.Stop(t); err != nil {
		t.Fatalf("first run: %v\n%s", err, a.Dump())
	}
	var id uint64
	for _, l := range linesOf(t, log, qpn) {
		if l.Kind == "missed-rearm" && l.Type == "finding" {
			id = l.ID
		}
	}
	if id == 0 || f.Kind != "missed-rearm" {
		t.Fatalf("first run: no missed-rearm line for %d", qpn)
	}
	if got := ownerView(t, p, pid, qpn); got != "MIGRATED" {
		t.Fatalf("between the runs the owner reads %s, want MIGRATED", got)
	}
	policy := writePolicy(t, dir, labPolicy(actuator.ModeEnforce))
	a2 := auditIn(t, dir, enforceDeadline, "--policy", policy, "--enforce")
	waitKind(t, log, string(actuator.KindActuated), qpn, 1)
	if got := ownerView(t, p, pid, qpn); got != "REARM" {
		t.Fatalf("after the restarted daemon acted the owner reads %s, want REARM", got)
	}
	var missed, resolved int
	for end := time.Now().Add(20 * time.Second); resolved == 0 && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		missed, resolved = 0, 0
		for _, l := range linesOf(t, log, qpn) {
			switch {
			case l.Kind == "missed-rearm" && l.Type == "finding":
				missed++
			case l.Type == "resolution" && l.Resolves == id:
				resolved++
			}
		}
	}
	if missed != 1 || resolved != 1 {
		b, _ := os.ReadFile(log)
		t.Fatalf("across the restart: %d missed-rearm lines (want 1) and %d resolutions of %d (want 1):\n%s\n%s", missed, resolved, id, b, a2.Stderr())
	}
	if !strings.Contains(a2.Stderr(), "restored from the flight recorder") {
		t.Errorf("the restarted daemon does not say what it restored:\n%s", a2.Stderr())
	}
}

// The daemon stopped before the rearm deadline and started again after
// it (the deadline passed while nobody watched): the missed rearm is
// judged on the reading taken at the start and says that apmwatch was not
// running for part of the QP's history.
func TestAuditRestartBeforeTheDeadline(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "findings.jsonl")
	const deadline = 5 * time.Second
	a := auditIn(t, dir, deadline)
	_, _, qpn := migratedPair(t)
	migrated := time.Now() // migratedPair returns after the migration
	if err := a.Stop(t); err != nil {
		t.Fatalf("first run: %v\n%s", err, a.Dump())
	}
	if ls := linesOf(t, log, qpn); len(ls) != 0 {
		t.Fatalf("the first run judged before it stopped (stopped %v after the migration, deadline %v): %+v",
			time.Since(migrated), deadline, ls)
	}
	time.Sleep(time.Until(migrated.Add(deadline + time.Second))) // the scenario: the deadline passes while the daemon is down
	auditIn(t, dir, deadline)
	l := waitKind(t, log, "missed-rearm", qpn, 1)
	var got []restartLine
	for _, x := range linesOf(t, log, qpn) {
		if x.Kind == "missed-rearm" {
			got = append(got, x)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0].Uncertain, "apmwatch was not running") || got[0].BootID == "" {
		t.Fatalf("missed-rearm across the restart: %+v (line %+v), want one saying apmwatch was not running, with the boot id", got, l)
	}
}
