//go:build labguest

// `apmwatch trace` on the simulated InfiniBand HCA: the alternate-path
// loads that RoCE refuses succeed here and are decoded, the migrations the
// HCA raises reach the owner's event path, and the CM accepts a LAP.
package guest

import (
	"fmt"
	"testing"
)

func TestTraceIBSimUserPair(t *testing.T) {
	userHook, _ := qpEventHooks(t)
	tr := startTrace(t)
	p, ready := startIBPair(t, 1, "rearm")
	q := QPN(t, ready, "ibsim0")
	me := Match("kind", "modify", "device", "ibsim0", "qpn", q, "origin", "user", "hook", "ib_modify_qp_with_udata")
	alt, _ := tr.Wait(t, 0, evTimeout, and(me, hasAttr("ALT_PATH")))
	if a := sub(alt, "alt"); alt.Int("ret") != 0 || a.Int("port") != 2 || a.Int("dlid") != 4 || a.Str("is_global") == "true" {
		t.Errorf("alternate path load at connect: %v, want ret 0, port 2, DLID 4, no GRH", alt)
	}
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
	ev, i := tr.Wait(t, 0, evTimeout, Match("kind", "qp-event", "event", "PATH_MIG", "device", "ibsim0", "qpn", q))
	if ev.Str("hook") != userHook || ev.Str("origin") != "user" {
		t.Errorf("PATH_MIG: %v, want hook %s on a user QP", ev, userHook)
	}
	re, i := tr.Wait(t, i, evTimeout, and(me, hasAttr("ALT_PATH")))
	if a := sub(re, "alt"); re.Int("ret") != 0 || a.Int("port") != 1 || a.Int("dlid") != 3 {
		t.Errorf("alternate path reload after the migration: %v, want ret 0, port 1, DLID 3", re)
	}
	tr.Wait(t, i, evTimeout, and(me, Match("mig_state", "REARM", "ret", 0)))
	if err := p.Stop(t); err != nil {
		t.Errorf("lab-ibpair: %v", err)
	}
	tr.stop(t)
}

func TestTraceIBSimCMLap(t *testing.T) {
	tr := startTrace(t)
	qps := startIBULPLines(t, "--cm")
	ids := map[string]int64{}
	for _, q := range qps {
		ids[q.Str("dev")] = q.Int("local_comm_id")
	}
	q1 := QPN(t, qps, "ibsim1")
	MustRun(t, "lab-lap", "--dev", "ibsim0", "--to", "ibsim1",
		"--local-comm-id", fmt.Sprint(ids["ibsim0"]), "--remote-comm-id", fmt.Sprint(ids["ibsim1"]),
		"--remote-qpn", fmt.Sprint(q1))
	tr.Wait(t, 0, evTimeout, Match("kind", "mad", "dir", "recv", "attr", "LAP", "device", "ibsim1"))
	h, _ := tr.Wait(t, 0, evTimeout, Match("kind", "cm-handler", "attr", "LAP", "device", "ibsim1"))
	if h.Int("ret") != 0 {
		t.Errorf("cm_lap_handler on InfiniBand: %v, want ret 0 (accepted)", h)
	}
	MustRun(t, "lab-ib", "port", "--dev", "ibsim1", "--port", "1", "down")
	n, _ := tr.Wait(t, 0, evTimeout, Match("kind", "cm-notify", "event", "PATH_MIG", "device", "ibsim1"))
	if n.Int("ret") != -22 {
		t.Errorf("ib_cm_notify(PATH_MIG) with the LAP pending: %v, want -22", n)
	}
	tr.stop(t)
}
