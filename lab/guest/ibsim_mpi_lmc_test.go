//go:build labguest

// Open MPI's APM over LMC on ibsim with LMC 1 (docs/lab.md, "Open MPI's
// APM, observed").
package guest

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lmcLoads sorts Open MPI's alternate loads in a trace: QP -> accepted. A
// load onto the LMC path names the QP's own port (alt.port), the DLID one
// past the primary's base (odd under LMC 1), source path bits 1 and, when
// ib_uverbs refused it, the address vector port the query left
// (alt_ah_port).
func lmcLoads(t *testing.T, lines []Line, refusedAHPort int64) (accepted, refused map[string]bool) {
	t.Helper()
	accepted, refused = map[string]bool{}, map[string]bool{}
	for _, l := range Filter(lines, and(Match("kind", "modify", "comm", "lab-mpi"), hasAttr("ALT_PATH"))) {
		alt, _ := l["alt"].(map[string]any)
		qp := fmt.Sprintf("%s/%d", l.Str("device"), l.Int("qpn"))
		if alt == nil || Line(alt).Int("dlid")%2 != 1 || Line(alt).Int("src_path_bits") != 1 {
			t.Errorf("an alternate load of Open MPI's that is no LMC path: %v", l)
			continue
		}
		_, hasAH := l["alt_ah_port"]
		switch {
		case l.Int("ret") == 0 && !strings.HasPrefix(l.Str("hook"), "ib_uverbs_"):
			accepted[qp] = true
		case l.Int("ret") == -22 && strings.HasPrefix(l.Str("hook"), "ib_uverbs_") && hasAH &&
			l.Int("alt_ah_port") == refusedAHPort && Line(alt).Int("port") != refusedAHPort:
			refused[qp] = true
		default:
			t.Errorf("an alternate load of Open MPI's, neither accepted nor refused by ib_uverbs for its AV port %d: %v", refusedAHPort, l)
		}
	}
	return accepted, refused
}

// TestIBSimOpenMPILMC: Open MPI 4.1.4's APM over LMC, with every ibsim
// port answering two LIDs (lab-ib lmc 1). openib loads on each QP the next
// LID of its own port (alt_port_num = port_num, DLID + 1, source path bits
// 1) on top of ibv_query_qp, leaving alt_ah_attr.port_num as the query
// read it. With unloaded-alt-port 0 (rdmavt and mlx5 read port 0) ib_uverbs
// refuses every load, as over ports. With unloaded-alt-port 1 (mlx4
// decodes port 1) the loads on port 1 get through and those on port 2 are
// refused (AV port 1, alternate port 2). When the switch stops routing to
// ibsim0 port 1's base LID (the port stays ACTIVE: no event), the QPs on
// port 1 migrate to their LMC path on both HCAs, the job completes with
// correct data, and Open MPI never rearms: apmwatch gives a missed-rearm
// for each migrated QP and an apm-modify-failed for each refused load, in
// trace and audit alike, and nothing else but stuck-rearm (information).
func TestIBSimOpenMPILMC(t *testing.T) {
	MustRun(t, "lab-ib", "lmc", "1")
	t.Cleanup(func() {
		Run(t, "lab-ib", "knob", "unloaded-alt-port", "0")
		Run(t, "lab-ib", "lmc", "0")
	})
	port := Filter(ibShow(t), and(Match("dev", "ibsim0", "port", 1), func(l Line) bool { return l.Has("lid") }))
	if len(port) != 1 || port[0].Int("lmc") != 1 {
		t.Fatalf("lab-ib show after lmc 1: %v", port)
	}
	base := port[0].Int("lid")

	// unloaded-alt-port 0: a short healthy job, every load refused.
	tr := startTrace(t)
	c, out, errb := mpirunAPM(apmOverLMC, "3")
	if err := c.Run(); err != nil {
		t.Fatalf("mpirun, APM over LMC: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	tr.stop(t)
	accepted, refused := lmcLoads(t, tr.Lines(), 0)
	if len(accepted) != 0 || len(refused) == 0 {
		t.Errorf("unloaded-alt-port 0: loads accepted on %v, refused on %v; want every one refused", accepted, refused)
	}
	for _, f := range Filter(tr.Lines(), Match("kind", "finding")) {
		if f.Str("finding") != "apm-modify-failed" || !refused[fmt.Sprintf("%s/%d", f.Str("device"), f.Int("qpn"))] {
			t.Errorf("unloaded-alt-port 0: finding %v, want only apm-modify-failed on refused loads", f)
		}
	}

	// unloaded-alt-port 1: port 1's loads get through; its base LID fails.
	MustRun(t, "lab-ib", "knob", "unloaded-alt-port", "1")
	dir := t.TempDir()
	a := startAudit(t, dir)
	tr = startTrace(t)
	c, out, errb = mpirunAPM(apmOverLMC, "15")
	if err := c.Start(); err != nil {
		t.Fatalf("mpirun: %v", err)
	}
	waitTraffic(t, errb)
	armed, perPort := 0, map[string]int{}
	for deadline := time.Now().Add(time.Minute); armed == 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		clear(perPort)
		for _, q := range ibsimRCQPs(t) {
			perPort[fmt.Sprintf("%s/port%d", q.Str("dev"), q.Int("port"))]++
			if q.Str("path_mig_state") == "ARMED" && q.Int("alt_port") == 1 && q.Int("alt_dlid") == q.Int("dlid")+1 {
				armed++
			}
		}
	}
	midJob(t)
	MustRun(t, "lab-ib", "link", "--lid", fmt.Sprint(base), "down")
	port = Filter(ibShow(t), and(Match("dev", "ibsim0", "port", 1), func(l Line) bool { return l.Has("lid") }))
	if len(port) != 1 || port[0].Str("state") != "ACTIVE" || port[0].Str("link") != "partial" || fmt.Sprint(port[0]["lids_down"]) != fmt.Sprintf("[%d]", base) {
		t.Errorf("lab-ib show, the route to LID %d down: %v, want the port ACTIVE, link partial, lids_down [%d]", base, port, base)
	}
	timer := time.AfterFunc(2*time.Minute, func() { _ = c.Process.Kill() })
	err := c.Wait()
	timer.Stop()
	var res struct{ Iterations, Errors int }
	if err != nil || json.Unmarshal([]byte(strings.TrimSpace(out.String())), &res) != nil || res.Iterations == 0 || res.Errors != 0 {
		t.Errorf("mpirun across the route failure with APM over LMC: %v, result %q, want exit 0 and no data error\nstderr:\n%s", err, out.String(), errb.String())
	}
	if armed == 0 {
		t.Errorf("no Open MPI QP read ARMED on its LMC path before the failure")
	}
	time.Sleep(3 * time.Second) // past the rearm deadline of the last migration
	tr.stop(t)
	accepted, refused = lmcLoads(t, tr.Lines(), 1)
	migrated := map[string]bool{}
	for _, l := range Filter(tr.Lines(), Match("kind", "qp-event", "event", "PATH_MIG")) {
		migrated[fmt.Sprintf("%s/%d", l.Str("device"), l.Int("qpn"))] = true
	}
	devs := map[string]bool{}
	for qp := range migrated {
		devs[strings.Split(qp, "/")[0]] = true
		if !accepted[qp] {
			t.Errorf("QP %s migrated without an accepted alternate load", qp)
		}
	}
	if !devs["ibsim0"] || !devs["ibsim1"] || len(refused) == 0 {
		t.Errorf("PATH_MIG on %v, refused loads on %v: want migrations on both HCAs and port 2's loads refused", migrated, refused)
	}
	missed, failed := map[string]bool{}, map[string]bool{}
	for _, f := range Filter(tr.Lines(), Match("kind", "finding")) {
		qp := fmt.Sprintf("%s/%d", f.Str("device"), f.Int("qpn"))
		switch f.Str("finding") {
		case "missed-rearm":
			missed[qp] = true
		case "apm-modify-failed":
			failed[qp] = true
		case "stuck-rearm":
			// an idle QP that rearmed at connect reads REARM until its first packet (info)
		default:
			t.Errorf("finding %v: Open MPI loaded, migrated and never rearmed, or had its load refused", f)
		}
	}
	if !maps.Equal(missed, migrated) || !maps.Equal(failed, refused) {
		t.Errorf("trace: missed-rearm on %v, migrated %v; apm-modify-failed on %v, refused %v", missed, migrated, failed, refused)
	}
	t.Logf("Open MPI over LMC: RC QPs %v, %d ARMED on their LMC path before the failure; loads accepted on %d QPs, refused on %d; %d QPs migrated",
		perPort, armed, len(accepted), len(refused), len(migrated))
	if err := a.Stop(t); err != nil {
		t.Errorf("apmwatch audit: %v\n%s", err, a.Dump())
	}
	n := map[string]int{}
	for _, f := range readAuditLines(t, filepath.Join(dir, "findings.jsonl")) {
		if f.Type == "finding" {
			n[f.Kind]++
		}
	}
	if n["missed-rearm"] != len(missed) || n["apm-modify-failed"] != len(failed) {
		t.Errorf("audit gives %v, trace %d missed-rearm and %d apm-modify-failed", n, len(missed), len(failed))
	}
}
