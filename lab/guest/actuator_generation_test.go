//go:build labguest

// The enforcer acts only on the QP generation it judged: a pending action
// is dropped when its QP is destroyed or rearmed during the grace period,
// with audit.Run and the live probes on lab-pair's QPs.
package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
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

// recreateRxe0 deletes rxe0 and adds it again on veth0: a fresh device
// numbers its QPs from the start again, which is how a QP number is reused
// here (rxe allocates them cyclically within one device's life). Every
// uverbs file of rxe0 must be closed first: rxe cannot disassociate them.
func recreateRxe0(t *testing.T) {
	t.Helper()
	for _, args := range [][]string{{"link", "delete", "rxe0"}, {"link", "add", "rxe0", "type", "rxe", "netdev", "veth0"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, "rdma", args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("rdma %v: %v: %s", args, err, out)
		}
	}
	zero := "0000:0000:0000:0000:0000:0000:0000:0000"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, _ := os.ReadFile("/sys/class/infiniband/rxe0/ports/1/state")
		gid, _ := os.ReadFile("/sys/class/infiniband/rxe0/ports/1/gids/1")
		if strings.Contains(string(st), "ACTIVE") && len(gid) > 0 && strings.TrimSpace(string(gid)) != zero {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rxe0 not ACTIVE with its GID 30s after re-adding it: %q %q", st, gid)
		}
	}
}

type genLine struct {
	enfLine
	ID uint64 `json:"id"`
	QP struct {
		QPN int64  `json:"qpn"`
		Gen uint32 `json:"gen"`
	} `json:"qp"`
}

func genLines(t *testing.T, path string, qpn int64) []genLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []genLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l genLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.QP.QPN == qpn && l.Type == "finding" {
			out = append(out, l)
		}
	}
	return out
}

// The owner of a migrated QP exits during the grace period and another
// process's new QP gets the same QP number (rxe0 re-created in between) and
// migrates too: the old action must not rearm it; the new QP is acted on
// for its own missed rearm, after its own grace.
func TestActuatorQPNReusedByAnotherProcess(t *testing.T) {
	recreateRxe0(t) // the next QP on rxe0 is its first
	p := labPolicy(actuator.ModeEnforce)
	p.Grace = actuator.Duration(10 * time.Second)
	e := actuator.NewEnforcer(p, actuator.New(nil))
	log, stop := runEnforcer(t, e)
	a, pidA, qpn := migratedPair(t)
	fa := waitKind(t, log, "missed-rearm", qpn, 1)
	var first genLine
	for _, l := range genLines(t, log, qpn) {
		if l.Kind == "missed-rearm" {
			first = l
			break
		}
	}
	if err := a.Stop(t); err != nil {
		t.Fatalf("lab-pair %d: %v", pidA, err)
	}
	recreateRxe0(t)
	b, readyB := startPair(t, "--behavior", "never-rearm")
	qpnB := QPN(t, readyB, "rxe0")
	pidB := int(readyB[0].Int("pid"))
	if qpnB != qpn {
		t.Fatalf("re-created rxe0 gave the new qp number %d, not %d: no reuse to test", qpnB, qpn)
	}
	Inject(t, "rxe0", qpn, "path_mig", true)
	t.Logf("qp %d of pid %d judged (finding %d, gen %d: %s); pid %d's new qp %d migrated during its grace",
		qpn, pidA, first.ID, first.QP.Gen, fa.Explanation, pidB, qpnB)
	waitKind(t, log, string(actuator.KindActuated), qpn, 1)
	if got := ownerView(t, b, pidB, qpn); got != "REARM" {
		t.Errorf("the new qp reads %s, want REARM", got)
	}
	stop()
	ref := fmt.Sprintf("finding %d (missed-rearm)", first.ID)
	for _, l := range genLines(t, log, qpn) {
		if !strings.HasPrefix(l.Kind, "actuat") && l.Kind != string(actuator.KindWouldActuate) {
			continue
		}
		if len(l.Evidence) > 0 && l.Evidence[0].What == ref || l.QP.Gen == first.QP.Gen {
			t.Errorf("the old generation's action reached the new qp: %s %s (gen %d, evidence %v)", l.Kind, l.Explanation, l.QP.Gen, l.Evidence)
		}
	}
	if s := e.Stats(); s.Dropped != 1 || s.Actuated != 1 || s.Failed+s.Skipped != 0 {
		t.Errorf("enforcer stats %+v, want the old action dropped and the new qp's own taken", s)
	}
}
