//go:build labguest

// The actuator on a real alternate path: on the simulated InfiniBand HCA
// the alternate loads that RoCE refuses succeed, so `apmwatch actuate`
// load-alt, rearm and migrate, and `audit --enforce`, show their whole
// effect on another process's QPs (lab-ibpair).
package guest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/actuator"
)

// actuateIB runs `apmwatch actuate OP` on an ibsim QP of pid; it must succeed.
func actuateIB(t *testing.T, op string, pid int64, dev string, qpn int64, extra ...string) Line {
	t.Helper()
	args := append([]string{"actuate", op, "--pid", strconv.FormatInt(pid, 10), "--qpn", strconv.FormatInt(qpn, 10),
		"--device", dev, "-o", "json"}, extra...)
	r := Run(t, "apmwatch", args...)
	if r.Code != 0 || len(r.Lines) != 1 {
		t.Fatalf("apmwatch %v: exit %d, %v\n%s", args, r.Code, r.Lines, r.Stderr)
	}
	return r.Lines[0]
}

// qpAttr reads a number from an actuate result's before/after QUERY_QP.
func qpAttr(l Line, side string, path ...string) int64 {
	m := sub(l, side)
	for _, k := range path[:len(path)-1] {
		m = sub(m, k)
	}
	return m.Int(path[len(path)-1])
}

// The three operations on a never-rearm pair left MIGRATED by a port
// failure: load-alt puts the alternate (back through port 1) into both
// QPs, as the owner's QUERY_QP (through its own file) and the driver
// read; rearm on both ends arms them (netlink reads ARMED once traffic
// carried MigReq=0); migrate moves the QP onto the alternate, which it
// copies (primary and alternate both port 1 to DLID 3), and the peer
// follows with PATH_MIG; rearm with a new alternate arms them again.
func TestIBActuatorOnRealAlternate(t *testing.T) {
	p, ready := startIBPair(t, 1, "never-rearm")
	q0, q1 := QPN(t, ready, "ibsim0"), QPN(t, ready, "ibsim1")
	pid := ready[0].Int("pid")
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
	for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
		p.Wait(t, 0, evTimeout, Match("query", "after_event", "dev", dev, "qpn", q))
		waitIB(t, dev, q, "MIGRATED on port 2", Match("path_mig_state", "MIGRATED", "port", 2))
	}
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "up")

	// alternate back through port 1: ibsim0 -> LID 3 (ibsim1 port 1), ibsim1 -> LID 1
	alt := map[string]int64{"ibsim0": 3, "ibsim1": 1}
	for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
		l := actuateIB(t, "load-alt", pid, dev, q, "--alt-port", "1", "--alt-dlid", fmt.Sprint(alt[dev]))
		if qpAttr(l, "after", "alt_port_num") != 1 || qpAttr(l, "after", "alt_dest", "dlid") != alt[dev] ||
			qpAttr(l, "after", "path_mig_state") != 0 || qpAttr(l, "after", "port_num") != 2 {
			t.Errorf("%s load-alt: after %v, want alternate port 1 to LID %d, still MIGRATED on port 2", dev, sub(l, "after"), alt[dev])
		}
		owner := actuateIB(t, "query", pid, dev, q)
		if qpAttr(owner, "before", "alt_port_num") != 1 || qpAttr(owner, "before", "alt_dest", "dlid") != alt[dev] {
			t.Errorf("%s: the owner's QUERY_QP after load-alt: %v", dev, sub(owner, "before"))
		}
		if d := ibQP(t, dev, q); d.Int("alt_port") != 1 || d.Int("alt_dlid") != alt[dev] || d.Str("alt_valid") != "true" {
			t.Errorf("%s: the driver after load-alt: %v", dev, d)
		}
	}
	for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
		l := actuateIB(t, "rearm", pid, dev, q)
		if s := qpAttr(l, "after", "path_mig_state"); s != 1 && s != 2 {
			t.Errorf("%s rearm: after %v, want REARM or ARMED", dev, sub(l, "after"))
		}
	}
	for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
		waitIB(t, dev, q, "ARMED", Match("path_mig_state", "ARMED"))
		if n := nlQP(t, dev, q); fmt.Sprint(n["path-mig-state"]) != "ARMED" {
			t.Errorf("netlink %s QP %d after the rearm: %v, want ARMED", dev, q, n)
		}
	}

	from := len(p.Lines())
	m := actuateIB(t, "migrate", pid, "ibsim0", q0)
	if qpAttr(m, "after", "path_mig_state") != 0 || qpAttr(m, "after", "port_num") != 1 || qpAttr(m, "after", "dest", "dlid") != 3 ||
		qpAttr(m, "after", "alt_port_num") != 1 || qpAttr(m, "after", "alt_dest", "dlid") != 3 {
		t.Errorf("migrate: after %v, want MIGRATED on port 1 to LID 3, the alternate the same path (copied)", sub(m, "after"))
	}
	p.Wait(t, from, evTimeout, Match("event", "PATH_MIG", "dev", "ibsim1", "qpn", q1))
	waitIB(t, "ibsim1", q1, "migrated to port 1", Match("path_mig_state", "MIGRATED", "port", 1, "alt_port", 1))

	// rearm with a new alternate (the one it has is the path it runs on)
	newAlt := map[string]int64{"ibsim0": 4, "ibsim1": 2}
	for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
		l := actuateIB(t, "rearm", pid, dev, q, "--alt-port", "2", "--alt-dlid", fmt.Sprint(newAlt[dev]))
		if qpAttr(l, "after", "alt_port_num") != 2 || qpAttr(l, "after", "alt_dest", "dlid") != newAlt[dev] {
			t.Errorf("%s rearm with a new alternate: after %v", dev, sub(l, "after"))
		}
	}
	for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
		waitIB(t, dev, q, "ARMED on port 1", Match("path_mig_state", "ARMED", "port", 1, "alt_port", 2, "alt_dlid", newAlt[dev]))
	}
	p.Stop(t)
}

// startIBEnforcer runs `apmwatch audit --policy P --enforce` on the ibsim
// devices (readings every second, the default rearm deadline) and returns
// the finding log.
func startIBEnforcer(t *testing.T, pol actuator.Policy) string {
	t.Helper()
	dir := t.TempDir()
	policy := writePolicy(t, dir, pol)
	findings := filepath.Join(dir, "findings.jsonl")
	ready := filepath.Join(dir, "ready")
	a := Start(t, "apmwatch", append([]string{"audit", "--findings", findings, "--metrics-addr", "",
		"--reconcile-interval", "1s", "--ready-file", ready, "--policy", policy, "--enforce"}, labHooks(t)...)...)
	waitFile(t, a, ready)
	t.Cleanup(func() {
		if t.Failed() { // the enforcer's own log: why an action was deferred, dropped or skipped
			t.Logf("apmwatch audit's log:\n%s", a.Stderr())
		}
	})
	return findings
}

func ibPolicy() actuator.Policy {
	p := actuator.DefaultPolicy()
	p.Allow.Comms = []string{"lab-ibpair"}
	p.Allow.Devices = []string{"ibsim0", "ibsim1"}
	p.RateLimit = actuator.RateLimit{Max: 100, Per: actuator.Duration(time.Minute), OwnerMax: 100}
	return p
}

// auditKinds counts the finding lines of a QP in the finding log by kind.
func auditKinds(t *testing.T, path string, dev string, qpn int64) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, l := range readAuditLines(t, path) {
		if l.Type == "finding" && l.QP.Device == dev && int64(l.QP.QPN) == qpn {
			n[l.Kind]++
		}
	}
	return n
}

// audit --enforce on never-rearm QPs: after a port failure the enforcer
// loads a new alternate (from the alternates table, or the previous primary
// once its port is ACTIVE again) and rearms both ends; netlink reads ARMED;
// the next failure migrates both cleanly (PATH_MIG, no PATH_MIG_ERR, no
// unprotected-failure). The actuated finding shows the paths before and after.
func TestIBAuditEnforceProtects(t *testing.T) {
	for _, c := range []struct {
		name string
		pol  func(actuator.Policy) actuator.Policy
	}{
		{"alternates", func(p actuator.Policy) actuator.Policy {
			p.Alternates = []actuator.AltRule{
				{Device: "ibsim0", Port: 2, Alt: actuator.AltSpec{Port: 1, DLID: 3}},
				{Device: "ibsim1", Port: 2, Alt: actuator.AltSpec{Port: 1, DLID: 1}},
			}
			return p
		}},
		{"previous-primary", func(p actuator.Policy) actuator.Policy {
			p.PreviousPrimary = true
			return p
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := startIBEnforcer(t, c.pol(ibPolicy()))
			p, ready := startIBPair(t, 1, "never-rearm")
			q0, q1 := QPN(t, ready, "ibsim0"), QPN(t, ready, "ibsim1")
			MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
			for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
				p.Wait(t, 0, evTimeout, Match("query", "after_event", "dev", dev, "qpn", q))
			}
			MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "up")
			want := map[string]int64{"ibsim0": 3, "ibsim1": 1}
			for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
				l := waitKind(t, log, string(actuator.KindActuated), q, 1)
				ev, _ := json.Marshal(l.Evidence)
				s := string(ev)
				if !strings.Contains(s, "before: state RTS mig MIGRATED port 2") ||
					!strings.Contains(s, fmt.Sprintf("alternate port 1 dlid %d", want[dev])) || !strings.Contains(s, "after: state RTS mig ") {
					t.Errorf("%s actuated finding: evidence %s, want the paths before (MIGRATED on port 2) and after (alternate port 1 to LID %d)", dev, s, want[dev])
				}
			}
			for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
				waitIB(t, dev, q, "ARMED", Match("path_mig_state", "ARMED", "port", 2, "alt_port", 1, "alt_dlid", want[dev]))
				deadline := time.Now().Add(evTimeout)
				for fmt.Sprint(nlQP(t, dev, q)["path-mig-state"]) != "ARMED" {
					if time.Now().After(deadline) {
						t.Fatalf("netlink %s QP %d: %v, want ARMED", dev, q, nlQP(t, dev, q))
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			from := len(p.Lines())
			MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "2", "down")
			for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
				p.Wait(t, from, evTimeout, Match("event", "PATH_MIG", "dev", dev, "qpn", q))
				waitIB(t, dev, q, "migrated back to port 1", Match("state", "RTS", "path_mig_state", "MIGRATED", "port", 1))
			}
			time.Sleep(settle)
			if m := Filter(p.Lines()[from:], Match("event", "PATH_MIG_ERR")); len(m) != 0 {
				t.Errorf("the protected QPs failed to migrate: %v", m)
			}
			for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
				n := auditKinds(t, log, dev, q)
				if n["unprotected-failure"] != 0 || n["migration-error"] != 0 || n["actuation-failed"] != 0 || n["missed-rearm"] < 1 {
					t.Errorf("%s QP %d findings %v: want missed-rearm acted on, no unprotected-failure, migration-error or actuation-failed", dev, q, n)
				}
			}
			p.Stop(t)
		})
	}
}
