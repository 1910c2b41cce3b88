//go:build labguest

// The enforcer acts only on the QP generation it judged: a pending action
// is dropped when its QP is destroyed or rearmed during the grace period,
// with audit.Run and the live probes on lab-pair's QPs.
package guest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/actuator"
	"github.com/apmwatch/apmwatch/apm"
)

const testGrace = 3 * time.Second

// qpLines reads the finding log's lines (findings and resolutions) of a QPN.
func qpLines(t *testing.T, path string, qpn int64) []enfLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []enfLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l enfLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.QP.QPN == qpn {
			out = append(out, l)
		}
	}
	return out
}

// waitResolved waits for the resolution of a QP's finding of kind.
func waitResolved(t *testing.T, path, kind string, qpn int64) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, l := range qpLines(t, path, qpn) {
			if l.Type == "resolution" && l.Kind == kind {
				return
			}
		}
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("no resolution of %s for qp %d in 20s; log:\n%s", kind, qpn, b)
}

// noActuation fails if the enforcer wrote anything about a QPN.
func noActuation(t *testing.T, path string, qpn int64) {
	t.Helper()
	for _, l := range qpLines(t, path, qpn) {
		switch apm.Kind(l.Kind) {
		case actuator.KindActuated, actuator.KindWouldActuate, actuator.KindActuationSkip, actuator.KindActuationError:
			t.Errorf("qp %d: the enforcer wrote %s: %s", qpn, l.Kind, l.Explanation)
		}
	}
}

func graceEnforcer() *actuator.Enforcer {
	p := labPolicy(actuator.ModeEnforce)
	p.Grace = actuator.Duration(testGrace)
	return actuator.NewEnforcer(p, actuator.New(nil))
}

// The owner rearms after the deadline but within the grace period: the
// model resolves its missed-rearm, and the enforcer drops the action
// instead of finding the QP rearmed and reporting actuation-failed.
func TestActuatorOwnerRearmsDuringGrace(t *testing.T) {
	e := graceEnforcer()
	log, stop := runEnforcer(t, e)
	p, ready := startPair(t, "--behavior", "late-rearm=1500ms")
	qpn := QPN(t, ready, "rxe0")
	pid := int(ready[0].Int("pid"))
	Inject(t, "rxe0", qpn, "path_mig", true)
	waitKind(t, log, "missed-rearm", qpn, 1)
	waitResolved(t, log, "missed-rearm", qpn)
	p.Wait(t, 0, evTimeout, Match("modify", "rearm", "dev", "rxe0", "qpn", qpn, "ret", 0))
	time.Sleep(testGrace + 2*time.Second) // past the grace, and two ticks
	noActuation(t, log, qpn)
	if got := ownerView(t, p, pid, qpn); got != "REARM" {
		t.Errorf("the owner reads %s after its own rearm, want REARM", got)
	}
	stop()
	if s := e.Stats(); s.Dropped != 1 || s.Failed+s.Actuated+s.Skipped != 0 {
		t.Errorf("enforcer stats %+v, want the one action dropped", s)
	}
}

// The owner destroys its QP during the grace period and another process
// makes new QPs: the old action is dropped, and the new process's QP, when
// it misses its own rearm, is acted on as its own generation.
func TestActuatorQPDestroyedDuringGrace(t *testing.T) {
	e := graceEnforcer()
	log, stop := runEnforcer(t, e)
	a, pidA, qpnA := migratedPair(t)
	waitKind(t, log, "missed-rearm", qpnA, 1)
	from := len(a.Lines())
	if err := syscall.Kill(pidA, syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	a.Wait(t, from, evTimeout, Match("destroyed", true, "dev", "rxe0", "qpn", qpnA))
	b, pidB, qpnB := migratedPair(t)
	t.Logf("qp %d of pid %d destroyed during the grace; new qp %d of pid %d (rxe allocates qp numbers cyclically: no reuse here)", qpnA, pidA, qpnB, pidB)
	l := waitKind(t, log, string(actuator.KindActuated), qpnB, 1)
	if got := ownerView(t, b, pidB, qpnB); got != "REARM" {
		t.Errorf("the new qp reads %s after its own actuation, want REARM: %+v", got, l)
	}
	noActuation(t, log, qpnA)
	stop()
	if s := e.Stats(); s.Dropped != 1 || s.Actuated != 1 || s.Failed+s.Skipped != 0 {
		t.Errorf("enforcer stats %+v, want the destroyed qp's action dropped and the new one's taken", s)
	}
}
