//go:build labguest

package guest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// The raw driver hook's path end to end: ibsim raises every QP event first
// through ibsim_mlx5_qp_event, shaped like mlx5_ib_qp_event (the struct
// mlx5_core_qp and the EQE number, atomic context, before the typed copy is
// queued), its argument kept as mlx5_ib keeps it. Where ib_core has no
// __ib_qp_event_handler (6.1), apmwatch attaches it as a raw hook: a kernel
// ULP's QPs are seen only through it, a user QP's through it and ib_uverbs'
// typed copy (one kept, the other counted as a duplicate), and each QP's
// missed rearm is found once. The raw copy names its device (found from
// the argument as the driver finds its QP): the two HCAs number their QPs
// alike, as several ConnectX of one host do, and each event is pinned on
// the QP of its own device. Where ib_core has __ib_qp_event_handler the
// raw hook is not needed and not attached.
func TestIBRawDriverHook(t *testing.T) {
	const spec = "ibsim:ibsim_mlx5_qp_event"
	if hasQPEventHandler(t) {
		out, err := exec.Command("apmwatch", "probes", "-o", "json", "--raw-event-hook", spec).Output()
		if err != nil {
			t.Fatalf("apmwatch probes --raw-event-hook: %v", err)
		}
		var hooks []event.Hook
		if err := json.Unmarshal(out, &hooks); err != nil {
			t.Fatalf("apmwatch probes -o json: %v\n%s", err, out)
		}
		i := slices.IndexFunc(hooks, func(h event.Hook) bool { return h.Name == "ibsim_mlx5_qp_event" })
		if i < 0 || hooks[i].Method != event.HookSkipped || hooks[i].Module != "ibsim" {
			t.Errorf("with __ib_qp_event_handler: %+v, want ibsim_mlx5_qp_event planned, skipped, in ibsim", hooks)
		}
		return
	}
	// No --device filter (a raw event names no device) and no
	// --event-hook apmlab:qp_event: the kernel ULP's events come only
	// through the raw hook.
	readyFile := filepath.Join(t.TempDir(), "ready")
	tr := Start(t, "apmwatch", "trace", "-o", "json", "--raw-event-hook", spec, "--ready-file", readyFile)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(readyFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace not ready in a minute\n%s", tr.Dump())
		}
	}
	MustRun(t, "lab-ib", "qpn", "align")                       // the two HCAs number the QPs below alike
	t.Cleanup(func() { MustRun(t, "lab-ib", "qpn", "apart") }) // later tests tell devices by QPN
	p, ready := startIBPair(t, 1, "never-rearm")
	u0, u1 := QPN(t, ready, "ibsim0"), QPN(t, ready, "ibsim1")
	k0, k1 := startIBULP(t, "no-rearm")
	if u0 != u1 || k0 != k1 {
		t.Errorf("QPNs %d/%d (user) and %d/%d (kernel): want each pair's QPN the same on both HCAs (lab-ib qpn align)", u0, u1, k0, k1)
	}
	waitIB(t, "ibsim0", k0, "ARMED", Match("path_mig_state", "ARMED"))
	waitIB(t, "ibsim1", k1, "ARMED", Match("path_mig_state", "ARMED"))
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
	qps := map[string][2]int64{"user": {u0, u1}, "kernel": {k0, k1}}
	for _, q := range qps {
		for dev, n := range pair(q[0], q[1]) {
			tr.Wait(t, 0, evTimeout, Match("kind", "finding", "finding", "missed-rearm", "device", dev, "qpn", n))
		}
	}
	for who, q := range qps {
		for dev, n := range pair(q[0], q[1]) {
			raw := Filter(tr.Lines(), Match("kind", "qp-event", "event", "PATH_MIG", "hook", "ibsim_mlx5_qp_event", "qpn", n, "device", dev))
			typed := Filter(tr.Lines(), Match("kind", "qp-event", "event", "PATH_MIG", "hook", "ib_uverbs_qp_event_handler", "qpn", n, "device", dev))
			if len(raw) != 1 || (who == "user") != (len(typed) == 1) || (who == "kernel" && len(typed) != 0) {
				t.Errorf("%s QP %d: %d raw PATH_MIG, %d from ib_uverbs; want one raw, and one typed copy for a user QP", who, n, len(raw), len(typed))
			}
		}
	}
	got := ibFindings(t, tr)
	want := append(both("missed-rearm", u0, u1), both("missed-rearm", k0, k1)...)
	wantSet(t, tr, got, want...)
	// The summary: every typed copy of a user QP's event came after its
	// raw twin and is counted as a duplicate (the PATH_MIGs above, and a
	// COMM_EST where a peer's first request found the QP still in RTR),
	// nothing unattributed. Each typed copy has its raw twin on the same
	// QP and device.
	typed := Filter(tr.Lines(), Match("kind", "qp-event", "hook", "ib_uverbs_qp_event_handler"))
	for _, l := range typed {
		if twins := Filter(tr.Lines(), Match("kind", "qp-event", "hook", "ibsim_mlx5_qp_event", "event", l.Str("event"),
			"device", l.Str("device"), "qpn", l.Int("qpn"))); len(twins) != 1 {
			t.Errorf("typed %s on %s/%d: %d raw copies, want 1", l.Str("event"), l.Str("device"), l.Int("qpn"), len(twins))
		}
	}
	m := regexp.MustCompile(`(\d+) duplicate QP events, (\d+) unattributed`).FindStringSubmatch(tr.Stderr())
	if want := strconv.Itoa(len(typed)); m == nil || m[1] != want || m[2] != "0" {
		t.Errorf("model line %q in:\n%s\nwant %s duplicate QP events (the user QPs' typed copies), 0 unattributed", m, tr.Stderr(), want)
	}
	p.Stop(t)
}
