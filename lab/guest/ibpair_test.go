//go:build labguest

// User QPs on the simulated InfiniBand HCA through the raw uverbs ABI
// (lab-ibpair). These tests need root inside the lab guest (make lab-test).
package guest

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// startIBPair runs lab-ibpair and waits for its ready lines (two per pair).
func startIBPair(t *testing.T, pairs int, behavior string) (*Proc, []Line) {
	t.Helper()
	p := Start(t, "lab-ibpair", "--behavior", behavior, "--pairs", fmt.Sprint(pairs))
	t.Cleanup(func() { resetFabric(t) })
	ready := p.Ready(t, 2*pairs)
	for _, r := range ready {
		if r.Str("path_mig_state") != "ARMED" {
			t.Fatalf("ready line %v: want ARMED", r)
		}
	}
	return p, ready
}

// A port DOWN migrates every armed QP whose primary crosses it, on both
// hosts, once its requests' retries run out: each owner reads PATH_MIG
// from its async fd, QUERY_QP shows the alternate copied into the primary
// (both on port 2), and after the rearm (new alternate on the other port,
// which returns 0 on InfiniBand) every QP is ARMED again, as netlink says.
func TestIBPairPortDownMigratesEveryPair(t *testing.T) {
	p, ready := startIBPair(t, 3, "rearm")
	MustRun(t, "lab-ib", "port", "--dev", "ibsim1", "--port", "1", "down")
	for _, r := range ready {
		dev, q := r.Str("dev"), r.Int("qpn")
		_, from := p.Wait(t, 0, evTimeout, Match("event", "PATH_MIG", "dev", dev, "qpn", q))
		ev, _ := p.Wait(t, from, evTimeout, Match("query", "after_event", "dev", dev, "qpn", q))
		wantDLID := map[string]int64{"ibsim0": 4, "ibsim1": 2}[dev]
		if ev.Str("path_mig_state") != "MIGRATED" || ev.Int("port") != 2 || ev.Int("dlid") != wantDLID ||
			ev.Int("alt_port") != 2 || ev.Int("alt_dlid") != wantDLID {
			t.Errorf("%s QP %d after PATH_MIG: %v, want MIGRATED on port 2 to LID %d, the alternate the same path (copied)", dev, q, ev, wantDLID)
		}
		alt, _ := p.Wait(t, from, evTimeout, Match("modify", "alt_path", "dev", dev, "qpn", q))
		if alt.Int("ret") != 0 || alt.Int("alt_port") != 1 || alt.Str("live") != "false" {
			t.Errorf("%s QP %d alternate reload: %v, want ret 0 onto port 1 (not live: ibsim1 port 1 is down)", dev, q, alt)
		}
		if re, _ := p.Wait(t, from, evTimeout, Match("modify", "rearm", "dev", dev, "qpn", q)); re.Int("ret") != 0 {
			t.Errorf("%s QP %d rearm: %v", dev, q, re)
		}
	}
	for _, r := range ready {
		waitIB(t, r.Str("dev"), r.Int("qpn"), "ARMED again", Match("path_mig_state", "ARMED", "port", 2))
		if n := nlQP(t, r.Str("dev"), r.Int("qpn")); fmt.Sprint(n["path-mig-state"]) != "ARMED" {
			t.Errorf("netlink %v: want ARMED", n)
		}
	}
}

// REARM stays REARM while the peer has not rearmed (its packets carry
// MigReq=1). Traffic in one direction arms both ends: the responder's ACKs
// carry its MigReq=0 (IBTA; hfi1/qib check every packet, ACKs included).
func TestIBPairRearmNeedsBothSides(t *testing.T) {
	for _, c := range []struct{ behavior, dev0, dev1 string }{
		{"one-side", "REARM", "MIGRATED"}, // ibsim1 never rearms
		{"no-traffic", "ARMED", "ARMED"},  // ibsim1 rearms but never sends
	} {
		t.Run(c.behavior, func(t *testing.T) {
			p, ready := startIBPair(t, 1, c.behavior)
			q0, q1 := QPN(t, ready, "ibsim0"), QPN(t, ready, "ibsim1")
			MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
			p.Wait(t, 0, evTimeout, Match("query", "after_react", "dev", "ibsim0", "qpn", q0))
			if c.dev1 == "ARMED" {
				waitIB(t, "ibsim1", q1, "ARMED", Match("path_mig_state", "ARMED"))
			}
			before := ibQP(t, "ibsim1", q1)
			time.Sleep(500 * time.Millisecond) // ten more ticks of simulated traffic
			a, b := ibQP(t, "ibsim0", q0), ibQP(t, "ibsim1", q1)
			if a.Str("path_mig_state") != c.dev0 || b.Str("path_mig_state") != c.dev1 {
				t.Errorf("%s: ibsim0 %v, ibsim1 %v; want %s and %s", c.behavior, a, b, c.dev0, c.dev1)
			}
			if c.behavior == "no-traffic" && (b.Int("tx") != before.Int("tx") || b.Int("rx") <= before.Int("rx")) {
				t.Errorf("no-traffic: ibsim1 %v then %v, want no request sent, ibsim0's received (and ACKed)", before, b)
			}
			if n := nlQP(t, "ibsim0", q0); fmt.Sprint(n["path-mig-state"]) != c.dev0 {
				t.Errorf("%s: netlink %v, want %s", c.behavior, n, c.dev0)
			}
			p.Stop(t)
		})
	}
}

// A forced migration (modify MIGRATED while ARMED) moves the QP to its
// alternate; the peer then receives MigReq=1 on its alternate path and
// migrates too, with PATH_MIG. What the forcing side sees is the
// firmware's: with rdmavt's answers (ibta) PATH_MIG, raised inside the
// modify, and the alternate copied; with the mlx5 guesses no event and a
// zeroed alternate.
func TestIBPairForcedMigration(t *testing.T) {
	eachProfile(t, func(t *testing.T, profile string) {
		p, ready := startIBPair(t, 1, "never-rearm")
		q0, q1 := QPN(t, ready, "ibsim0"), QPN(t, ready, "ibsim1")
		if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		f, _ := p.Wait(t, 0, evTimeout, Match("modify", "force_migrate", "qpn", q0))
		if f.Int("ret") != 0 {
			t.Fatalf("forced migration: %v", f)
		}
		af, _ := p.Wait(t, 0, evTimeout, Match("query", "after_force", "qpn", q0))
		wantAlt := map[string]int64{"ibta": 2, "mlx5": 0}[profile]
		if af.Str("path_mig_state") != "MIGRATED" || af.Int("port") != 2 || af.Int("dlid") != 4 || af.Int("alt_port") != wantAlt {
			t.Errorf("after the forced migration: %v, want MIGRATED on port 2 to LID 4, alternate port %d", af, wantAlt)
		}
		p.Wait(t, 0, evTimeout, Match("event", "PATH_MIG", "dev", "ibsim1", "qpn", q1))
		time.Sleep(300 * time.Millisecond)
		m := Filter(p.Lines(), Match("event", "PATH_MIG", "qpn", q0))
		if want := map[string]int{"ibta": 1, "mlx5": 0}[profile]; len(m) != want {
			t.Errorf("the forcing side got PATH_MIG %d times (%v), want %d", len(m), m, want)
		}
	})
}

// mvapich's single modify (ALT_PATH|PATH_MIG_STATE=REARM) is accepted and
// arms again; alt-onto-primary arms onto the path it runs on, so the next
// failure of that path is a failed migration: with rdmavt's answers the
// QP migrates onto the same dead path (PATH_MIG) and dies when those
// retries run out too; with the mlx5 guesses firmware raises PATH_MIG_ERR.
// Either way the owner gets a retry-exceeded completion.
func TestIBPairBehaviours(t *testing.T) {
	t.Run("mvapich", func(t *testing.T) {
		p, ready := startIBPair(t, 1, "mvapich")
		q0 := QPN(t, ready, "ibsim0")
		MustRun(t, "lab-ib", "link", "--lid", "1", "down")
		m, _ := p.Wait(t, 0, evTimeout, Match("modify", "alt_path_rearm", "qpn", q0))
		if m.Int("ret") != 0 || m.Int("mask") != 0x44000 {
			t.Errorf("mvapich modify %v: want mask 0x44000 (ALT_PATH|PATH_MIG_STATE), ret 0", m)
		}
		waitIB(t, "ibsim0", q0, "ARMED again", Match("path_mig_state", "ARMED"))
		p.Stop(t)
	})
	t.Run("alt-onto-primary", func(t *testing.T) {
		eachProfile(t, func(t *testing.T, profile string) {
			p, ready := startIBPair(t, 1, "alt-onto-primary")
			q0 := QPN(t, ready, "ibsim0")
			MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
			_, from := p.Wait(t, 0, evTimeout, Match("event", "PATH_MIG", "qpn", q0))
			alt, _ := p.Wait(t, from, evTimeout, Match("modify", "alt_path", "qpn", q0))
			if alt.Int("ret") != 0 || alt.Int("alt_port") != 2 {
				t.Errorf("alt-onto-primary load %v: want ret 0 onto port 2 (the new primary)", alt)
			}
			waitIB(t, "ibsim0", q0, "ARMED", Match("path_mig_state", "ARMED", "alt_port", 2))
			from = len(p.Lines())
			MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "2", "down")
			want := map[string]string{"ibta": "PATH_MIG", "mlx5": "PATH_MIG_ERR"}[profile]
			p.Wait(t, from, evTimeout, Match("event", want, "qpn", q0))
			p.Wait(t, from, evTimeout, Match("wc", "RETRY_EXC_ERR", "dev", "ibsim0", "qpn", q0))
			waitIB(t, "ibsim0", q0, "ERR", Match("state", "ERR"))
			p.Stop(t)
		})
	})
}

// A QP whose primary fails while it is not armed goes to ERR with a
// retry-exceeded completion on its send CQ, and no migration event.
func TestIBPairUnarmedFailureCompletes(t *testing.T) {
	p, ready := startIBPair(t, 1, "never-rearm")
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
	for _, r := range ready {
		p.Wait(t, 0, evTimeout, Match("event", "PATH_MIG", "dev", r.Str("dev"), "qpn", r.Int("qpn")))
	}
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "2", "down")
	for _, r := range ready {
		dev, q := r.Str("dev"), r.Int("qpn")
		p.Wait(t, 0, evTimeout, Match("wc", "RETRY_EXC_ERR", "status", 12, "dev", dev, "qpn", q))
		if n := nlQP(t, dev, q); fmt.Sprint(n["state"]) != "ERR" {
			t.Errorf("netlink %v: want state ERR", n)
		}
	}
	if m := Filter(p.Lines(), Match("event", "PATH_MIG_ERR")); len(m) != 0 {
		t.Errorf("unarmed QPs raised PATH_MIG_ERR: %v", m)
	}
}

// QPs on a shared receive queue: when one enters ERR (its retries run out
// unarmed) the HCA raises QP_LAST_WQE_REACHED on it (IBTA; rdmavt's
// rvt_error_qp), the one async sign that an SRQ consumer lost a QP, with
// the retry-exceeded completion. A QP without an SRQ gets no such event.
func TestIBPairSRQLastWQEReached(t *testing.T) {
	for _, srq := range []bool{true, false} {
		t.Run(fmt.Sprintf("srq=%v", srq), func(t *testing.T) {
			args := []string{"--behavior", "never-rearm", "--pairs", "1"}
			if srq {
				args = append(args, "--srq")
			}
			p := Start(t, "lab-ibpair", args...)
			t.Cleanup(func() { resetFabric(t) })
			ready := p.Ready(t, 2)
			MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
			for _, r := range ready {
				p.Wait(t, 0, evTimeout, Match("event", "PATH_MIG", "dev", r.Str("dev"), "qpn", r.Int("qpn")))
			}
			MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "2", "down")
			for _, r := range ready {
				dev, q := r.Str("dev"), r.Int("qpn")
				p.Wait(t, 0, evTimeout, Match("wc", "RETRY_EXC_ERR", "dev", dev, "qpn", q))
				if srq {
					p.Wait(t, 0, evTimeout, Match("event", "QP_LAST_WQE_REACHED", "dev", dev, "qpn", q))
				}
			}
			time.Sleep(300 * time.Millisecond)
			if m := Filter(p.Lines(), Match("event", "QP_LAST_WQE_REACHED")); !srq && len(m) != 0 {
				t.Errorf("QPs without an SRQ got %v", m)
			}
			p.Stop(t)
		})
	}
}

// UC has neither ACKs nor a retry timer (IBTA; hfi1/qib retry only RC), so
// a dead primary goes unnoticed: no migration, no error, no completion,
// while the same failure migrates RC QPs within a second. Only software
// moves a UC QP: a forced migration, which the peer follows on the first
// MigReq=1 packet on its alternate.
func TestIBPairUCFailureUnnoticed(t *testing.T) {
	p := Start(t, "lab-ibpair", "--behavior", "never-rearm", "--uc")
	t.Cleanup(func() { resetFabric(t) })
	ready := p.Ready(t, 2)
	q0, q1 := QPN(t, ready, "ibsim0"), QPN(t, ready, "ibsim1")
	before := int64(-1)
	for _, e := range MustRun(t, "lab-ib", "events") {
		before = max(before, e.Int("seq"))
	}
	from := len(p.Lines())
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
	time.Sleep(2 * time.Second) // four times an RC QP's retries at the same timeout
	for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
		if l := ibQP(t, dev, q); l.Str("type") != "UC" || l.Str("state") != "RTS" || l.Str("path_mig_state") != "ARMED" ||
			l.Int("port") != 1 || l.Int("migrations") != 0 || l.Int("retries_exhausted") != 0 {
			t.Errorf("%s UC QP after its primary died: %v, want RTS, ARMED on port 1, unmoved", dev, l)
		}
	}
	// The HCA raises its events in order (ibsim's event log): whatever was
	// raised for these QPs after the port's PORT_ERR came of the failure
	// (a bring-up's COMM_EST, queued before it, comes before it). None may.
	portErr := int64(-1)
	evs := MustRun(t, "lab-ib", "events")
	for _, e := range evs {
		if e.Int("seq") > before && e.Str("dev") == "ibsim0" && e.Int("port") == 1 && e.Str("event") == "PORT_ERR" {
			portErr = e.Int("seq")
			break
		}
	}
	if portErr < 0 {
		t.Fatalf("no PORT_ERR on ibsim0 port 1 in the HCA's event log: %v", evs)
	}
	for _, e := range evs {
		if e.Int("seq") > portErr && e.Has("qpn") && (e.Str("dev") == "ibsim0" && e.Int("qpn") == q0 || e.Str("dev") == "ibsim1" && e.Int("qpn") == q1) {
			t.Errorf("a UC path failure raised %v", e)
		}
	}
	// Nor did the owners see a completion after it.
	if m := Filter(p.Lines()[from:], func(l Line) bool { return l.Has("wc") }); len(m) != 0 {
		t.Errorf("a UC path failure completed %v", m)
	}
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	p.Wait(t, 0, evTimeout, Match("event", "PATH_MIG", "dev", "ibsim1", "qpn", q1))
	waitIB(t, "ibsim1", q1, "migrated to port 2", Match("path_mig_state", "MIGRATED", "port", 2))
	p.Stop(t)
}
