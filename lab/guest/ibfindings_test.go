//go:build labguest

// The scenario matrix on the simulated InfiniBand HCA: for each behaviour of
// lab-ibpair (user QPs) and lab-ulp --ib (the kernel ULP), the exact set of
// findings `apmwatch trace -o json` prints about the ibsim QPs, nothing more
// and nothing less, with its netlink readings in the stream.
package guest

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// settle is how long a scenario waits after its last reaction: past the
// rearm, notify and LAP deadlines and the episode linger (2 s each), with
// netlink readings (every second) in between.
const settle = 3500 * time.Millisecond

// allKinds shows every event, the netlink readings and the findings.
const allKinds = "modify,modify-entry,qp-event,port-event,cm-notify,cm-handler,mad,qp-create,qp-destroy,qp-truth,finding"

// ibTrace runs `apmwatch trace -o json` on the two ibsim devices.
func ibTrace(t *testing.T, extra ...string) *Proc {
	t.Helper()
	return startApmwatch(t, append([]string{"trace", "-o", "json", "--device", "ibsim0,ibsim1"}, extra...)...)
}

// fk names one finding ("kind dev/qpn"), a resolution as "kind(resolved) dev/qpn".
func fk(kind, dev string, qpn int64) string { return fmt.Sprintf("%s %s/%d", kind, dev, qpn) }

// ibFindings stops the trace (its summary must count no loss) and returns
// every finding and resolution it printed, sorted.
func ibFindings(t *testing.T, tr *Proc) []string {
	t.Helper()
	if err := tr.Stop(t); err != nil {
		t.Fatalf("trace on SIGTERM: %v\n%s", err, tr.Dump())
	}
	if !strings.Contains(tr.Stderr(), "lost: 0,") {
		t.Errorf("trace summary reports losses:\n%s", tr.Stderr())
	}
	var out []string
	for _, l := range tr.Lines() {
		switch l.Str("kind") {
		case "finding":
			out = append(out, fk(l.Str("finding"), l.Str("device"), l.Int("qpn")))
		case "resolution":
			out = append(out, fk(l.Str("finding")+"(resolved)", l.Str("device"), l.Int("qpn")))
		}
	}
	slices.Sort(out)
	return out
}

func wantSet(t *testing.T, tr *Proc, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if got == nil {
		got = []string{}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("findings %v, want exactly %v", got, want)
		qps := map[string]bool{}
		for _, l := range tr.Lines() {
			if k := l.Str("kind"); k == "finding" || k == "resolution" {
				qps[l.Str("device")+"/"+l.Str("qpn")] = true
			}
		}
		for _, l := range tr.Lines() { // what the trace saw of those QPs
			if qps[l.Str("device")+"/"+l.Str("qpn")] || (l.Str("device") == "" && l.Str("kind") == "qp-event") {
				t.Logf("  %v", l)
			}
		}
	}
}

// ibPairScenario starts the trace (extra flags) and one lab-ibpair pair with
// the behaviour, and returns both with the QPNs.
func ibPairScenario(t *testing.T, behavior string, extra ...string) (tr, p *Proc, q0, q1 int64) {
	t.Helper()
	tr = ibTrace(t, extra...)
	p, ready := startIBPair(t, 1, behavior)
	return tr, p, QPN(t, ready, "ibsim0"), QPN(t, ready, "ibsim1")
}

// portDown takes a port of ibsim0 down and waits until both owners printed
// what they did about it (an after_react line when the behaviour reacts to
// PATH_MIG, else the after_event query).
func portDown(t *testing.T, p *Proc, port int, react bool, q0, q1 int64) {
	t.Helper()
	from := len(p.Lines())
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", fmt.Sprint(port), "down")
	what := "after_event"
	if react {
		what = "after_react"
	}
	for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
		p.Wait(t, from, evTimeout, Match("query", what, "dev", dev, "qpn", q))
	}
}

// failPort takes a port of ibsim0 down with the traffic flowing, and
// waits until the owners reacted to the migrations its retries cause
// (reacted returns once both did).
func failPort(t *testing.T, port int, reacted func()) {
	t.Helper()
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", fmt.Sprint(port), "down")
	reacted()
}

// ibReacted waits until both lab-ibpair QPs printed after_react from index from.
func ibReacted(t *testing.T, p *Proc, from int, q0, q1 int64) func() {
	return func() {
		for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
			p.Wait(t, from, evTimeout, Match("query", "after_react", "dev", dev, "qpn", q))
		}
	}
}

// ulpRearmed waits until the driver reads both kernel ULP QPs armed again
// on port 2.
func ulpRearmed(t *testing.T, q0, q1 int64) func() {
	return func() {
		waitIB(t, "ibsim0", q0, "re-ARMED", Match("path_mig_state", "ARMED", "port", 2))
		waitIB(t, "ibsim1", q1, "re-ARMED", Match("path_mig_state", "ARMED", "port", 2))
	}
}

// pair names both ends of a lab-ibpair or lab-ulp pair.
func pair(q0, q1 int64) map[string]int64 { return map[string]int64{"ibsim0": q0, "ibsim1": q1} }

// both is the finding of one kind on both ends.
func both(kind string, q0, q1 int64) []string {
	return []string{fk(kind, "ibsim0", q0), fk(kind, "ibsim1", q1)}
}

// User QPs whose owner does the three steps (or MVAPICH's single modify):
// a port failure migrates them and nothing at all is found.
func TestIBFindingsCorrectApplications(t *testing.T) {
	eachProfile(t, func(t *testing.T, _ string) {
		for _, b := range []string{"rearm", "mvapich"} {
			t.Run(b, func(t *testing.T) {
				tr, p, q0, q1 := ibPairScenario(t, b)
				failPort(t, 1, ibReacted(t, p, len(p.Lines()), q0, q1))
				waitIB(t, "ibsim0", q0, "ARMED again", Match("path_mig_state", "ARMED", "port", 2))
				waitIB(t, "ibsim1", q1, "ARMED again", Match("path_mig_state", "ARMED", "port", 2))
				time.Sleep(settle)
				wantSet(t, tr, ibFindings(t, tr))
				p.Stop(t)
			})
		}
	})
}

// never-rearm: a missed rearm on both ends; the next failure (port 2) kills
// both connections when their retries run out: unprotected-failure naming
// the missed rearm.
func TestIBFindingsMissedRearmToUnprotectedFailure(t *testing.T) {
	eachProfile(t, func(t *testing.T, _ string) {
		tr, p, q0, q1 := ibPairScenario(t, "never-rearm")
		portDown(t, p, 1, false, q0, q1)
		for dev, q := range pair(q0, q1) {
			tr.Wait(t, 0, evTimeout, Match("kind", "finding", "finding", "missed-rearm", "device", dev, "qpn", q))
		}
		MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "2", "down")
		var uf []Line
		for dev, q := range pair(q0, q1) {
			waitIB(t, dev, q, "ERR", Match("state", "ERR"))
			l, _ := tr.Wait(t, 0, evTimeout, Match("kind", "finding", "finding", "unprotected-failure", "device", dev, "qpn", q))
			uf = append(uf, l)
		}
		time.Sleep(settle)
		wantSet(t, tr, ibFindings(t, tr), append(both("missed-rearm", q0, q1), both("unprotected-failure", q0, q1)...)...)
		for _, l := range uf {
			wantCause(t, tr, l, "missed-rearm")
		}
		p.Stop(t)
	})
}

// wantCause checks an unprotected-failure: critical, its cause the one
// finding of kind on the same QP, and the time it was unprotected.
func wantCause(t *testing.T, tr *Proc, l Line, kind string) {
	t.Helper()
	c := Filter(tr.Lines(), Match("kind", "finding", "finding", kind, "device", l.Str("device"), "qpn", l.Int("qpn")))
	if len(c) == 0 || l.Int("cause") == 0 || l.Int("cause") != c[0].Int("id") || l.Int("unprotected_ns") <= 0 || l.Str("severity") != "critical" {
		t.Errorf("unprotected-failure %v: want severity critical, cause = the %s's id (%v) and unprotected_ns > 0", l, kind, c)
	}
}

// A rearm that arms no new alternate (none loaded, or the path the QP runs
// on), and a rearm before the alternate load (lap-race). A migration
// copies the alternate into the primary, so a bare rearm arms onto the
// path the QP runs on (rdmavt's answers), or onto nothing (the mlx5
// guess: the alternate reads zero): when that path fails too, the
// connection is lost, an unprotected-failure caused by the rearm.
func TestIBFindingsRearmAlternate(t *testing.T) {
	eachProfile(t, func(t *testing.T, profile string) {
		for _, c := range []struct {
			behavior, kind string
			nextFailure    bool // the path the QP runs on fails next
		}{
			{"rearm-no-alt", "rearm-without-new-alternate", true},
			{"alt-onto-primary", "rearm-without-new-alternate", false},
			{"rearm-then-alt", "lap-race", false},
		} {
			t.Run(c.behavior, func(t *testing.T) {
				tr, p, q0, q1 := ibPairScenario(t, c.behavior)
				portDown(t, p, 1, true, q0, q1)
				for dev, q := range pair(q0, q1) {
					tr.Wait(t, 0, evTimeout, Match("kind", "finding", "finding", c.kind, "device", dev, "qpn", q))
				}
				want := both(c.kind, q0, q1)
				if c.nextFailure {
					for dev, q := range pair(q0, q1) {
						waitIB(t, dev, q, "ARMED", Match("path_mig_state", "ARMED", "port", 2))
					}
					MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "2", "down")
					for dev, q := range pair(q0, q1) {
						waitIB(t, dev, q, "ERR", Match("state", "ERR"))
						l, _ := tr.Wait(t, 0, evTimeout, Match("kind", "finding", "finding", "unprotected-failure", "device", dev, "qpn", q))
						wantCause(t, tr, l, c.kind)
					}
					want = append(want, both("unprotected-failure", q0, q1)...)
					if profile == "ibta" {
						// The HCA migrates onto the same dead path (PATH_MIG),
						// and the owner rearms it again without a new one.
						want = append(want, both(c.kind, q0, q1)...)
					}
					// firmware refused the migration (PATH_MIG_ERR): the
					// failure is the bare rearm's unprotected-failure alone
				}
				time.Sleep(settle)
				wantSet(t, tr, ibFindings(t, tr), want...)
				p.Stop(t)
			})
		}
	})
}

// The kernel ULP on InfiniBand: correct (nothing), no-rearm (missed-rearm,
// then unprotected-failure on the next failure), rearm-no-alt.
func TestIBFindingsKernelULP(t *testing.T) {
	eachProfile(t, func(t *testing.T, _ string) {
		t.Run("correct", func(t *testing.T) {
			tr := ibTrace(t)
			q0, q1 := startIBULP(t, "correct")
			waitIB(t, "ibsim0", q0, "ARMED", Match("path_mig_state", "ARMED"))
			waitIB(t, "ibsim1", q1, "ARMED", Match("path_mig_state", "ARMED"))
			failPort(t, 1, ulpRearmed(t, q0, q1))
			time.Sleep(settle)
			wantSet(t, tr, ibFindings(t, tr))
		})
		t.Run("no-rearm", func(t *testing.T) {
			tr := ibTrace(t)
			q0, q1 := startIBULP(t, "no-rearm")
			waitIB(t, "ibsim0", q0, "ARMED", Match("path_mig_state", "ARMED"))
			waitIB(t, "ibsim1", q1, "ARMED", Match("path_mig_state", "ARMED"))
			MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
			for dev, q := range pair(q0, q1) {
				tr.Wait(t, 0, evTimeout, Match("kind", "finding", "finding", "missed-rearm", "device", dev, "qpn", q))
			}
			MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "2", "down")
			for dev, q := range pair(q0, q1) {
				tr.Wait(t, 0, evTimeout, Match("kind", "finding", "finding", "unprotected-failure", "device", dev, "qpn", q))
			}
			time.Sleep(settle)
			wantSet(t, tr, ibFindings(t, tr), append(both("missed-rearm", q0, q1), both("unprotected-failure", q0, q1)...)...)
		})
		t.Run("rearm-no-alt", func(t *testing.T) {
			tr := ibTrace(t)
			q0, q1 := startIBULP(t, "rearm-no-alt")
			waitIB(t, "ibsim0", q0, "ARMED", Match("path_mig_state", "ARMED"))
			waitIB(t, "ibsim1", q1, "ARMED", Match("path_mig_state", "ARMED"))
			MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
			for dev, q := range pair(q0, q1) {
				tr.Wait(t, 0, evTimeout, Match("kind", "finding", "finding", "rearm-without-new-alternate", "device", dev, "qpn", q))
			}
			time.Sleep(settle)
			wantSet(t, tr, ibFindings(t, tr), both("rearm-without-new-alternate", q0, q1)...)
		})
	})
}

// startIBULPCM starts the kernel ULP over ib_cm and returns QPNs and comm ids.
func startIBULPCM(t testing.TB, behavior string) (q0, q1, id0, id1 int64) {
	t.Helper()
	ls := MustRun(t, "lab-ulp", "start", "--ib", "--cm", "--behavior", behavior)
	t.Cleanup(func() {
		Run(t, "lab-ulp", "stop")
		resetFabric(t)
	})
	qps := Filter(ls, Match("kernel", true))
	if len(qps) != 2 {
		t.Fatalf("lab-ulp start --ib --cm: want 2 QP lines, got %v", ls)
	}
	for _, q := range qps {
		if q.Str("dev") == "ibsim0" {
			q0, id0 = q.Int("qpn"), q.Int("local_comm_id")
		} else {
			q1, id1 = q.Int("qpn"), q.Int("local_comm_id")
		}
	}
	waitIB(t, "ibsim0", q0, "ARMED", Match("path_mig_state", "ARMED"))
	waitIB(t, "ibsim1", q1, "ARMED", Match("path_mig_state", "ARMED"))
	return q0, q1, id0, id1
}

// A CM-managed kernel ULP that never tells the CM about the migration, and
// one whose cm_id holds a LAP it never answered when the path fails:
// ib_cm_notify returns -EINVAL and the CM keeps the dead path.
func TestIBFindingsCM(t *testing.T) {
	eachProfile(t, ibFindingsCM)
}

func ibFindingsCM(t *testing.T, _ string) {
	t.Run("no-notify", func(t *testing.T) {
		tr := ibTrace(t)
		q0, q1, _, _ := startIBULPCM(t, "no-notify")
		failPort(t, 1, ulpRearmed(t, q0, q1))
		for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
			tr.Wait(t, 0, evTimeout, Match("kind", "finding", "finding", "cm-not-notified", "device", dev, "qpn", q))
		}
		time.Sleep(settle)
		wantSet(t, tr, ibFindings(t, tr), fk("cm-not-notified", "ibsim0", q0), fk("cm-not-notified", "ibsim1", q1))
	})
	t.Run("lap-unanswered", func(t *testing.T) {
		// The unanswered LAP is a lap-race of its own after --lap-deadline;
		// a long one leaves only what the migration makes of it.
		tr := ibTrace(t, "--lap-deadline", "10m", "--kind", allKinds)
		q0, q1, id0, id1 := startIBULPCM(t, "correct")
		from := nextSeq(t)
		MustRun(t, "lab-lap", "--dev", "ibsim0", "--to", "ibsim1",
			"--local-comm-id", fmt.Sprint(id0), "--remote-comm-id", fmt.Sprint(id1), "--remote-qpn", fmt.Sprint(q1))
		waitLog(t, from, "IB_CM_LAP_RECEIVED", Match("kind", "note", "what", "cm_lap_received", "qpn", q1))
		failPort(t, 1, ulpRearmed(t, q0, q1))
		n := waitLog(t, from, "ib_cm_notify on ibsim1", Match("kind", "note", "what", "cm_notify_path_mig", "qpn", q1))
		if n.Int("ret") != -22 {
			t.Errorf("ib_cm_notify(PATH_MIG) with the LAP pending: %v, want -22", n)
		}
		f, _ := tr.Wait(t, 0, evTimeout, Match("kind", "finding", "finding", "lap-race", "device", "ibsim1", "qpn", q1))
		if f.Int("errno") != 22 {
			t.Errorf("lap-race %v: want errno 22 (ib_cm_notify's -EINVAL)", f)
		}
		waitIB(t, "ibsim0", q0, "re-ARMED", Match("path_mig_state", "ARMED"))
		time.Sleep(settle)
		wantSet(t, tr, ibFindings(t, tr), fk("lap-race", "ibsim1", q1))
	})
}

// Four port failures within a minute, each rearmed correctly: flapping,
// once per QP, and nothing else.
func TestIBFindingsFlapping(t *testing.T) {
	eachProfile(t, func(t *testing.T, _ string) {
		tr, p, q0, q1 := ibPairScenario(t, "rearm")
		// The next failure a second after the path came back, then half a
		// second, then at once: flapping as fast as the owners rearm.
		for i, gap := range []time.Duration{time.Second, time.Second / 2, 0, 0} {
			port := 1 + i%2 // the path the QPs run on now
			failPort(t, port, ibReacted(t, p, len(p.Lines()), q0, q1))
			waitIB(t, "ibsim0", q0, "ARMED again", Match("path_mig_state", "ARMED", "port", 3-port))
			waitIB(t, "ibsim1", q1, "ARMED again", Match("path_mig_state", "ARMED", "port", 3-port))
			MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", fmt.Sprint(port), "up")
			time.Sleep(gap)
		}
		time.Sleep(settle)
		wantSet(t, tr, ibFindings(t, tr), both("flapping", q0, q1)...)
		p.Stop(t)
	})
}

// Software forces a migration of ibsim0's QP (lab-ibpair on SIGUSR1) and
// the owner reacts to PATH_MIG as to any migration. With rdmavt's answers
// the forcing side gets PATH_MIG inside the modify: both ends rearm and
// nothing is found (one forced migration, not flapping). With the mlx5
// guess firmware raises nothing at the forcing side: its owner never
// rearms (missed-rearm), while the peer, migrated by the MigReq=1 packets,
// rearms and stays REARM (stuck-rearm).
func TestIBFindingsForcedMigration(t *testing.T) {
	eachProfile(t, func(t *testing.T, profile string) {
		tr, p, q0, q1 := ibPairScenario(t, "rearm", "--stuck-rearm", "3s")
		if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		p.Wait(t, 0, evTimeout, Match("query", "after_react", "dev", "ibsim1", "qpn", q1))
		var want []string
		if profile == "ibta" {
			p.Wait(t, 0, evTimeout, Match("query", "after_react", "dev", "ibsim0", "qpn", q0))
			waitIB(t, "ibsim0", q0, "ARMED again", Match("path_mig_state", "ARMED", "port", 2))
			waitIB(t, "ibsim1", q1, "ARMED again", Match("path_mig_state", "ARMED", "port", 2))
		} else {
			want = []string{fk("missed-rearm", "ibsim0", q0), fk("stuck-rearm", "ibsim1", q1)}
			tr.Wait(t, 0, 2*evTimeout, Match("kind", "finding", "finding", "stuck-rearm", "device", "ibsim1", "qpn", q1))
		}
		time.Sleep(settle)
		wantSet(t, tr, ibFindings(t, tr), want...)
		p.Stop(t)
	})
}

// The original report's symptom on InfiniBand: a PATH_MIG the HCA raises for
// a QP that did not move (injected without a migration): netlink still
// reads ARMED on port 1.
func TestIBFindingsMigStateMismatch(t *testing.T) {
	eachProfile(t, func(t *testing.T, _ string) {
		tr, p, q0, _ := ibPairScenario(t, "never-rearm")
		Inject(t, "ibsim0", q0, "path_mig", false)
		p.Wait(t, 0, evTimeout, Match("query", "after_event", "dev", "ibsim0", "qpn", q0))
		tr.Wait(t, 0, evTimeout, Match("kind", "finding", "finding", "mig-state-mismatch", "device", "ibsim0", "qpn", q0))
		time.Sleep(settle)
		wantSet(t, tr, ibFindings(t, tr), fk("mig-state-mismatch", "ibsim0", q0), fk("missed-rearm", "ibsim0", q0))
		p.Stop(t)
	})
}

// Both ports of ibsim0 fail: the armed QPs cannot migrate to a live path.
// With rdmavt's answers they migrate blindly (PATH_MIG), their owners
// rearm, and they die when the alternate's retries run out too; with the
// mlx5 guess firmware raises PATH_MIG_ERR, then ERR. Either way a
// migration-error on both ends.
func TestIBFindingsMigrationError(t *testing.T) {
	eachProfile(t, func(t *testing.T, profile string) {
		tr, p, q0, q1 := ibPairScenario(t, "rearm")
		MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "2", "down")
		MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
		ev := map[string]string{"ibta": "PATH_MIG", "mlx5": "PATH_MIG_ERR"}[profile]
		for dev, q := range pair(q0, q1) {
			p.Wait(t, 0, evTimeout, Match("event", ev, "dev", dev, "qpn", q))
			waitIB(t, dev, q, "ERR", Match("state", "ERR"))
			tr.Wait(t, 0, evTimeout, Match("kind", "finding", "finding", "migration-error", "device", dev, "qpn", q))
		}
		time.Sleep(settle)
		wantSet(t, tr, ibFindings(t, tr), both("migration-error", q0, q1)...)
		p.Stop(t)
	})
}

// One side rearms and the other does not (one-side): ibsim0's QP reads
// REARM for good (stuck-rearm, from the netlink readings), ibsim1's
// migration was never rearmed. Two recordings, one per device as on two
// hosts, replay to the same findings in a postmortem, which pairs the two
// ends: one-sided-rearm. When both rearm but only ibsim0 sends
// (no-traffic), ibsim1's ACKs carry its MigReq=0 and both ends arm:
// nothing is found.
func TestIBFindingsStuckAndOneSided(t *testing.T) {
	eachProfile(t, func(t *testing.T, _ string) {
		for _, c := range []struct {
			behavior string
			stuck    bool // ibsim0 stays REARM
			want1    []string
		}{
			{"one-side", true, []string{"missed-rearm"}},
			{"no-traffic", false, nil},
		} {
			t.Run(c.behavior, func(t *testing.T) {
				dir := t.TempDir()
				a, b := dir+"/a.rec", dir+"/b.rec"
				ra := startApmwatch(t, "record", "--device", "ibsim0", "-w", a)
				rb := startApmwatch(t, "record", "--device", "ibsim1", "-w", b)
				tr, p, q0, q1 := ibPairScenario(t, c.behavior, "--stuck-rearm", "3s")
				failPort(t, 1, func() {
					p.Wait(t, 0, evTimeout, Match("query", "after_react", "dev", "ibsim0", "qpn", q0))
					p.Wait(t, 0, evTimeout, Match("query", "after_event", "dev", "ibsim1", "qpn", q1))
					if c.behavior == "no-traffic" {
						p.Wait(t, 0, evTimeout, Match("query", "after_react", "dev", "ibsim1", "qpn", q1))
					}
				})
				var want []string
				if c.stuck {
					tr.Wait(t, 0, 2*evTimeout, Match("kind", "finding", "finding", "stuck-rearm", "device", "ibsim0", "qpn", q0))
					if n := nlQP(t, "ibsim0", q0); fmt.Sprint(n["path-mig-state"]) != "REARM" {
						t.Errorf("netlink %v: want REARM", n)
					}
					want = append(want, fk("stuck-rearm", "ibsim0", q0))
				} else {
					for dev, q := range pair(q0, q1) {
						waitIB(t, dev, q, "ARMED", Match("path_mig_state", "ARMED", "port", 2))
					}
				}
				time.Sleep(settle)
				for _, k := range c.want1 {
					want = append(want, fk(k, "ibsim1", q1))
				}
				wantSet(t, tr, ibFindings(t, tr), want...)
				for _, r := range []*Proc{ra, rb} {
					if err := r.Stop(t); err != nil {
						t.Fatalf("record: %v\n%s", err, r.Dump())
					}
				}
				got := findingSet(postmortem(t, "--stuck-rearm", "3s", a, b))
				wantPM := slices.Clone(want)
				if c.stuck {
					wantPM = append(wantPM, fk("one-sided-rearm", "ibsim1", q1))
				}
				slices.Sort(wantPM)
				if (len(wantPM) != 0 || len(got) != 0) && !slices.Equal(got, wantPM) {
					t.Errorf("postmortem of the two recordings: %v, want exactly %v", got, wantPM)
				}
				p.Stop(t)
			})
		}
	})
}

// An owner without the CM that does the three steps a second after the
// migration: there is no LAP to race (its ends exchange paths without the
// CM), and the rearm is in time: no finding.
func TestIBFindingsSlowReaction(t *testing.T) {
	eachProfile(t, func(t *testing.T, _ string) {
		tr, p, q0, q1 := ibPairScenario(t, "late-rearm=1s")
		portDown(t, p, 1, true, q0, q1)
		time.Sleep(settle)
		wantSet(t, tr, ibFindings(t, tr))
		p.Stop(t)
	})
}
