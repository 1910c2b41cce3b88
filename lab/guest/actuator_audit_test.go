//go:build labguest

// The enforcer as the audit daemon's actor: audit.Run with the live probes
// and actuator.Enforcer, on lab-pair's QP migrated by the test module.
package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/actuator"
	"github.com/apmwatch/apmwatch/audit"
	"github.com/apmwatch/apmwatch/collector"
	"github.com/apmwatch/apmwatch/event"
)

const enforceDeadline = 500 * time.Millisecond

type enfLine struct {
	Type        string `json:"type"`
	Kind        string `json:"kind"`
	Explanation string `json:"explanation"`
	Unprotected int64  `json:"unprotected_ns"`
	First       uint64 `json:"first_boot_ns"`
	Last        uint64 `json:"last_boot_ns"`
	QP          struct {
		Device string `json:"device"`
		QPN    int64  `json:"qpn"`
	} `json:"qp"`
	Evidence []struct {
		What string `json:"what"`
	} `json:"evidence"`
}

// runAudit runs audit.Run with the enforcer under policy until the test
// ends; it returns the finding log's path.
func runAudit(t *testing.T, p actuator.Policy) string {
	t.Helper()
	path, _ := runEnforcer(t, actuator.NewEnforcer(p, actuator.New(nil)))
	return path
}

// runEnforcer runs audit.Run with e as actor; stop ends it (also at the
// end of the test) and waits, after which e may be read.
func runEnforcer(t *testing.T, e *actuator.Enforcer) (path string, stop func()) {
	t.Helper()
	dir := t.TempDir()
	cfg := audit.DefaultConfig()
	cfg.Findings = filepath.Join(dir, "findings.jsonl")
	cfg.MetricsAddr = ""
	cfg.ReadyFile = filepath.Join(dir, "ready")
	cfg.ReconcileInterval = 0
	cfg.Model.RearmDeadline = enforceDeadline
	cfg.Actor = e
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	var mu sync.Mutex
	done := make(chan error, 1)
	go func() {
		done <- audit.Run(ctx, cfg, audit.Deps{
			Open:   func() (event.Source, error) { return collector.Open(collector.Options{}) },
			Check:  collector.Preflight,
			Stdout: &bytes.Buffer{},
			Stderr: &lockedWriter{mu: &mu, w: &stderr},
		})
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Errorf("audit did not stop")
			}
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(cfg.ReadyFile); err == nil {
			return cfg.Findings, stop
		}
		select {
		case err := <-done:
			mu.Lock()
			t.Fatalf("audit exited: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit not ready in 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitKind waits for the n-th finding line of kind for a QP number.
func waitKind(t *testing.T, path, kind string, qpn int64, n int) enfLine {
	t.Helper()
	return waitKindOn(t, path, kind, "", qpn, n)
}

// waitKindOn waits for the n-th finding line of kind for a QP of a device
// ("": any device).
func waitKindOn(t *testing.T, path, kind, dev string, qpn int64, n int) enfLine {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var hits []enfLine
		if b, err := os.ReadFile(path); err == nil {
			sc := bufio.NewScanner(bytes.NewReader(b))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var l enfLine
				if json.Unmarshal(sc.Bytes(), &l) == nil && l.Kind == kind && l.QP.QPN == qpn && (dev == "" || l.QP.Device == dev) && l.Type == "finding" {
					hits = append(hits, l)
				}
			}
		}
		if len(hits) >= n {
			return hits[n-1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("no %d-th %s finding for qp %d in 20s; log:\n%s", n, kind, qpn, b)
	return enfLine{}
}

func labPolicy(mode string) actuator.Policy {
	p := actuator.DefaultPolicy()
	p.Mode = mode
	p.Allow.Comms = []string{"lab-pair"}
	p.Allow.Devices = []string{"rxe0"}
	p.RateLimit = actuator.RateLimit{Max: 1000, Per: actuator.Duration(time.Minute)}
	p.PreviousPrimary = true // on RoCE the load is not sent (the kernel refuses it): then the rearm alone
	p.RearmWithoutAlternate = true
	return p
}

func TestAuditMonitorModeChangesNothing(t *testing.T) {
	log := runAudit(t, labPolicy(actuator.ModeMonitor))
	p, pid, qpn := migratedPair(t)
	l := waitKind(t, log, string(actuator.KindWouldActuate), qpn, 1)
	if !strings.Contains(l.Explanation, "monitor mode: would rearm") {
		t.Errorf("would-actuate: %+v", l)
	}
	if got := ownerView(t, p, pid, qpn); got != "MIGRATED" {
		t.Errorf("monitor mode: the owner reads %s, want MIGRATED", got)
	}
}

// TestAuditEnforceRearms also measures the unprotected window, PATH_MIG to
// verified rearm, with zero grace (docs/performance.md "Actuator").
func TestAuditEnforceRearms(t *testing.T) {
	// The window splits into the wait for the decision (deadline to the
	// enforcer asking for the owner) and the action (owner lookup, borrow,
	// query, the rearm, the checks).
	clock := newActionClock()
	e := clock.enforcer(labPolicy(actuator.ModeEnforce))
	log, _ := runEnforcer(t, e)
	p, ready := startPair(t, "--behavior", "never-rearm")
	qpn := QPN(t, ready, "rxe0")
	pid := int(ready[0].Int("pid"))
	runs := envCount(t, "APMWATCH_ENFORCE_RUNS", 12)
	var windows, decide, act []time.Duration
	for i := 1; i <= runs; i++ {
		Inject(t, "rxe0", qpn, "path_mig", true)
		l := waitKind(t, log, string(actuator.KindActuated), qpn, i)
		if i == 1 {
			if got := ownerView(t, p, pid, qpn); got != "REARM" {
				t.Fatalf("after audit --enforce the owner reads %s, want REARM", got)
			}
			ev, _ := json.Marshal(l.Evidence)
			if !strings.Contains(string(ev), "MIGRATED -\\u003e REARM") && !strings.Contains(string(ev), "MIGRATED -> REARM") {
				t.Errorf("actuated finding lacks the before/after: %s", ev)
			}
			if !strings.Contains(l.Explanation, "APM is InfiniBand-only") || !strings.Contains(l.Explanation, "is not sent") {
				t.Errorf("on rxe the previous primary must not be sent, and the finding must say why: %s", l.Explanation)
			}
			if ev, _ := json.Marshal(l.Evidence); strings.Contains(string(ev), "alt_path") {
				t.Errorf("on rxe an alternate path was sent: %s", ev)
			}
		}
		if l.Unprotected <= 0 {
			t.Fatalf("actuated finding without unprotected time: %+v", l)
		}
		windows = append(windows, time.Duration(l.Unprotected))
		if s, ok := clock.start("rxe0", i); ok && l.First > 0 {
			decide = append(decide, time.Duration(int64(s)-int64(l.First)-int64(enforceDeadline)))
			act = append(act, time.Duration(int64(l.Last)-int64(s)))
		}
	}
	logWindows(t, windows, decide, act)
	clock.logParts(t)
	if windows[0] < enforceDeadline {
		t.Errorf("acted before the rearm deadline: %v", windows[0])
	}
}
