//go:build labguest

// These tests need root inside the lab guest (make lab-test).
package guest

import (
	"testing"
	"time"
)

// A LAP or APR crafted through umad reaches the other port's ib_cm, which
// counts it in cm_rx_msgs before dropping it (no such connection; RoCE).
func TestLAPAndAPRCounted(t *testing.T) {
	for _, c := range []struct{ from, to, attr string }{
		{"rxe0", "rxe1", "lap"},
		{"rxe1", "rxe0", "apr"},
	} {
		before := CMRxCounter(t, c.to, 1, c.attr)
		ls := MustRun(t, "lab-lap", "--dev", c.from, "--to", c.to, "--attr", c.attr, "--count", "2")
		if sent := Filter(ls, Match("dev", c.from)); len(sent) != 2 {
			t.Errorf("lab-lap %s: want 2 sent lines, got %v", c.attr, ls)
		}
		deadline := time.Now().Add(5 * time.Second)
		for CMRxCounter(t, c.to, 1, c.attr) < before+2 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if after := CMRxCounter(t, c.to, 1, c.attr); after != before+2 {
			t.Errorf("%s cm_rx_msgs/%s went %d -> %d, want +2", c.to, c.attr, before, after)
		}
	}
}

// rdma_cm connection; on PATH_MIG the program calls rdma_notify, which
// reaches ib_cm_notify -> cm_migrate: accepted (0) on an ESTABLISHED id
// whose lap_state is idle.
func TestCMPairNotify(t *testing.T) {
	p := Start(t, "lab-cm-pair", "--behavior", "rearm-no-alt", "--duration", "2m")
	ready := p.Ready(t, 2)
	q := QPN(t, ready, "rxe0")
	if ready[0].Str("cm") == "" {
		t.Errorf("ready lines lack the cm role: %v", ready)
	}
	// A second connection at the same time gets its own port.
	p2 := Start(t, "lab-cm-pair", "--duration", "1m")
	p2.Ready(t, 2)
	ports := map[string]bool{}
	for _, x := range []*Proc{p, p2} {
		l, _ := x.Wait(t, 0, evTimeout, Match("cm_setup", true))
		ports[l.Str("tcp_port")] = true
	}
	if len(ports) != 2 {
		t.Errorf("two lab-cm-pairs share a port: %v", ports)
	}

	Inject(t, "rxe0", q, "path_mig", true)
	st, i := p.Wait(t, 0, evTimeout, Match("query", "after_event", "qpn", q))
	if st.Str("path_mig_state") != "MIGRATED" {
		t.Errorf("after --migrate: %v, want MIGRATED", st)
	}
	n, i := p.Wait(t, i, evTimeout, Match("notify", "PATH_MIG", "qpn", q))
	if n.Int("ret") != 0 || n.Str("cm") != "client" {
		t.Errorf("rdma_notify(PATH_MIG): %v, want ret 0 from the client", n)
	}
	st, _ = p.Wait(t, i, evTimeout, Match("query", "after_react", "qpn", q))
	if st.Str("path_mig_state") != "REARM" {
		t.Errorf("after rearm: %v, want REARM", st)
	}
}
