//go:build labguest

// Open MPI's own APM (Debian's openmpi 4.1.4, the openib BTL with APM over
// ports) on ibsim, under `apmwatch trace` and `apmwatch audit`: what it
// does, as the HCA and the kernel's verbs layer see it (docs/lab.md,
// "Open MPI's APM, observed").
package guest

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// apmOverPorts asks openib for APM over ports: port 2 is the alternate of
// port 1.
var apmOverPorts = []string{"--mca", "btl_openib_enable_apm_over_ports", "1"}

// apmOverLMC asks openib for APM over LMC: the alternate of each QP is
// the next LID of the same ports (DLID + 1, source path bits + 1).
// max_lmc 0 (use every LID of the port): its default, 1, uses only the
// base LID and turns APM over LMC off ("apm without lmc").
var apmOverLMC = []string{"--mca", "btl_openib_enable_apm_over_lmc", "1", "--mca", "btl_openib_max_lmc", "0"}

// mpiArgs runs lab-mpi on two ranks, rank 0 on ibsim0 and rank 1 on
// ibsim1, through the openib BTL with the APM mode apm asks for.
// ib_timeout 14 (67 ms, 8 tries: about 0.5 s before the retries run out)
// instead of Open MPI's 20 (34 s).
func mpiArgs(apm []string, seconds string, env ...string) []string {
	app := func(dev string) []string {
		a := append([]string{"-np", "1", "env", "OMPI_MCA_btl_openib_if_include=" + dev}, env...)
		return append(a, "lab-mpi", "--seconds", seconds)
	}
	args := append([]string{"--mca", "plm", "isolated", "--mca", "btl", "openib,self",
		"--mca", "btl_openib_allow_ib", "1",
		"--mca", "btl_openib_warn_no_device_params_found", "0", "--mca", "btl_openib_ib_timeout", "14"}, apm...)
	args = append(append(args, app("ibsim0")...), ":")
	return append(args, app("ibsim1")...)
}

// mpiSeconds is how long a job runs: def, or APMWATCH_MPI_SECONDS (make
// lab-mpi-minute: a minute, as a user's job would run).
func mpiSeconds(def string) string {
	if s := os.Getenv("APMWATCH_MPI_SECONDS"); s != "" {
		return s
	}
	return def
}

// midJob waits, in a run of APMWATCH_MPI_SECONDS, until half the job has
// run; otherwise the path fails as soon as data moves.
func midJob(t *testing.T) {
	t.Helper()
	s := os.Getenv("APMWATCH_MPI_SECONDS")
	if s == "" {
		return
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("APMWATCH_MPI_SECONDS=%q: want a number of seconds", s)
	}
	time.Sleep(time.Duration(n) * time.Second / 2)
}

// mpirun runs lab-mpi with APM over ports.
func mpirun(seconds string, env ...string) (*exec.Cmd, *syncBuf, *syncBuf) {
	return mpirunAPM(apmOverPorts, seconds, env...)
}

func mpirunAPM(apm []string, seconds string, env ...string) (*exec.Cmd, *syncBuf, *syncBuf) {
	c := exec.Command("mpirun", mpiArgs(apm, mpiSeconds(seconds), env...)...)
	c.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	var out, errb syncBuf
	c.Stdout, c.Stderr = &out, &errb
	return c, &out, &errb
}

// waitTraffic waits (up to 2 minutes: MPI_Init is slow on a loaded
// machine) until rank 0 reports progress: the ranks are connected and
// exchanging messages.
func waitTraffic(t *testing.T, errb *syncBuf) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if strings.Contains(errb.String(), `"progress":true`) {
			return
		}
	}
	t.Fatalf("lab-mpi made no progress in 2 minutes:\n%s", errb.String())
}

// ibsimRCQPs reads ibsim's view of the user RC QPs (show).
func ibsimRCQPs(t *testing.T) []Line {
	t.Helper()
	b, err := os.ReadFile("/sys/kernel/debug/ibsim/show")
	if err != nil {
		t.Fatal(err)
	}
	ls, err := ParseLines(b)
	if err != nil {
		t.Fatal(err)
	}
	return Filter(ls, Match("type", "RC", "owner", "user"))
}

// TestIBSimOpenMPI: Open MPI 4.1.4 asks for APM over ports, and its
// alternate never reaches the HCA: openib's mca_btl_openib_load_apm
// modifies with IB_QP_ALT_PATH and alt_port_num 2 but leaves
// alt_ah_attr.port_num as ibv_query_qp gave it (0, no alternate yet), and
// ib_uverbs refuses an alternate whose AH port differs from alt_port_num
// (EINVAL) before the verbs layer: ibsim never gets it, Open MPI prints the
// failure (naming ibv_query_qp). apmwatch's uverbs command hooks see each
// refused load and give an apm-modify-failed naming the cause, per QP.
// A healthy job completes with correct data. When port 1 of ibsim0 fails,
// every QP runs out of retries, Open MPI reports RETRY EXCEEDED and the
// job fails; Open MPI never prints the PORT_ERR, which it would if it read
// its async events (it never registers their handler). apmwatch sees the
// port event; audit, reading a QP whose load was refused in ERR, gives an
// unprotected-failure for it (docs/lab.md).
func TestIBSimOpenMPI(t *testing.T) {
	dir := t.TempDir()
	a := startAudit(t, dir)
	tr := startTrace(t)
	t.Cleanup(func() { Run(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "up") })

	// A healthy job.
	c, out, errb := mpirun("6")
	if err := c.Start(); err != nil {
		t.Fatalf("mpirun: %v", err)
	}
	waitTraffic(t, errb)
	qps := ibsimRCQPs(t)
	if err := c.Wait(); err != nil {
		t.Fatalf("mpirun, healthy: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	var res struct{ Iterations, Errors int }
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &res); err != nil || res.Iterations == 0 || res.Errors != 0 {
		t.Errorf("lab-mpi result %q (%v): want iterations > 0, errors 0", out.String(), err)
	}
	if !strings.Contains(errb.String(), "mca_btl_openib_load_apm") || !strings.Contains(errb.String(), "Invalid argument (22)") {
		t.Errorf("Open MPI did not report its refused alternate load:\n%s", errb.String())
	}
	if len(qps) < 2 {
		t.Errorf("ibsim shows %d user RC QPs during the job, want Open MPI's on both HCAs", len(qps))
	}
	for _, q := range qps {
		if q.Str("alt_valid") != "" && q.Str("alt_valid") != "false" || q.Str("path_mig_state") != "MIGRATED" {
			t.Errorf("an alternate reached the HCA: %v", q)
		}
	}

	// Port 1 of ibsim0 fails in the middle of a job.
	c, out, errb = mpirun("30")
	if err := c.Start(); err != nil {
		t.Fatalf("mpirun: %v", err)
	}
	waitTraffic(t, errb)
	midJob(t)
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
	timer := time.AfterFunc(2*time.Minute, func() { _ = c.Process.Kill() })
	err := c.Wait()
	timer.Stop()
	if err == nil || !strings.Contains(errb.String()+out.String(), "RETRY EXCEEDED") {
		t.Errorf("mpirun across the port failure: %v, want a failure with RETRY EXCEEDED\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	if strings.Contains(errb.String(), "IBV_EVENT_PORT_ERR") {
		t.Errorf("Open MPI reported the PORT_ERR: it reads its async events now; docs/lab.md says it does not")
	}
	tr.Wait(t, 0, evTimeout, Match("kind", "port-event", "device", "ibsim0", "port", 1, "event", "PORT_ERR"))
	tr.stop(t)
	for _, dev := range []string{"ibsim0", "ibsim1"} {
		tr.Wait(t, 0, evTimeout, Match("kind", "modify", "device", dev, "comm", "lab-mpi", "state", "RTS", "ret", 0))
	}
	refused := checkRefusedLoads(t, tr.Lines())
	// trace: an apm-modify-failed for each QP whose load was refused,
	// naming the cause; and an unprotected-failure for such a QP that its
	// netlink reading found in ERR after the port failure (which of them
	// it reads before Open MPI tears them down varies); nothing else
	got := map[string]bool{}
	for _, f := range Filter(tr.Lines(), Match("kind", "finding")) {
		qp := fmt.Sprintf("%s/%d", f.Str("device"), f.Int("qpn"))
		switch {
		case f.Str("finding") == "unprotected-failure" && refused[qp]:
			t.Logf("trace: unprotected-failure on %s", qp)
		case f.Str("finding") == "apm-modify-failed" && strings.Contains(f.Str("remediation"), "alt_ah_attr.port_num"):
			got[qp] = true
		default:
			t.Errorf("trace finding %v, want only apm-modify-failed naming the address vector's port, and unprotected-failure on a QP whose load was refused", f)
		}
	}
	if !maps.Equal(got, refused) {
		t.Errorf("trace: apm-modify-failed on %v, want on the QPs whose load was refused, %v", got, refused)
	}
	time.Sleep(2 * time.Second) // audit's deadlines past the last event
	if err := a.Stop(t); err != nil {
		t.Errorf("apmwatch audit: %v\n%s", err, a.Dump())
	}
	// audit: the same
	got = map[string]bool{}
	for _, f := range readAuditLines(t, filepath.Join(dir, "findings.jsonl")) {
		qp := fmt.Sprintf("%s/%d", f.QP.Device, f.QP.QPN)
		switch f.Kind {
		case "apm-modify-failed":
			got[qp] = true
		case "unprotected-failure":
			if !refused[qp] {
				t.Errorf("audit: unprotected-failure on %s, whose alternate load was never refused", qp)
			}
			t.Logf("audit: unprotected-failure on %s (unprotected %v)", qp, time.Duration(f.Unprotected))
		default:
			t.Errorf("audit finding %+v, want only apm-modify-failed and unprotected-failure", f)
		}
	}
	if !maps.Equal(got, refused) {
		t.Errorf("audit: apm-modify-failed on %v, want on the QPs whose load was refused, %v", got, refused)
	}
}

// checkRefusedLoads: every alternate load of Open MPI's is seen, refused
// by ib_uverbs (EINVAL) before the verbs layer, naming alternate port 2
// with an address vector of port 0, on both HCAs. It returns their QPs.
func checkRefusedLoads(t *testing.T, lines []Line) map[string]bool {
	t.Helper()
	perDev, qps := map[string]int{}, map[string]bool{}
	for _, l := range Filter(lines, and(Match("kind", "modify", "comm", "lab-mpi"), hasAttr("ALT_PATH"))) {
		alt, _ := l["alt"].(map[string]any)
		_, hasAH := l["alt_ah_port"]
		if !strings.HasPrefix(l.Str("hook"), "ib_uverbs_") || l.Int("ret") != -22 || alt == nil ||
			Line(alt).Int("port") != 2 || !hasAH || l.Int("alt_ah_port") != 0 {
			t.Errorf("an alternate load of Open MPI's, not refused by ib_uverbs as it is: %v", l)
		}
		perDev[l.Str("device")]++
		qps[fmt.Sprintf("%s/%d", l.Str("device"), l.Int("qpn"))] = true
	}
	if perDev["ibsim0"] == 0 || perDev["ibsim1"] == 0 {
		t.Errorf("refused alternate loads per HCA %v, want Open MPI's on both", perDev)
	}
	t.Logf("alternate loads refused by ib_uverbs, per HCA: %v, on %d QPs", perDev, len(qps))
	return qps
}

// altportLines are lab-altport.so's JSON lines in mpirun's stderr.
func altportLines(stderr string) []Line {
	var out []Line
	for _, l := range strings.Split(stderr, "\n") {
		if i := strings.Index(l, `{"altport"`); i >= 0 {
			if pl, err := ParseLine(l[i:]); err == nil {
				out = append(out, pl)
			}
		}
	}
	return out
}

// TestIBSimOpenMPIAltPortFixed: Open MPI with its refused alternate load
// corrected (lab-altport.so sets alt_ah_attr.port_num, nothing else): every
// QP loads port 2 and rearms, and reads ARMED once traffic flows; when port
// 1 of ibsim0 fails, the QPs with requests outstanding migrate after their
// retries (and their peers on the first packet with MigReq=1), the job
// completes with correct data, and Open MPI, which never reads its async
// events, never rearms: apmwatch gives a missed-rearm for each migrated QP.
func TestIBSimOpenMPIAltPortFixed(t *testing.T) {
	dir := t.TempDir()
	a := startAudit(t, dir)
	tr := startTrace(t)
	t.Cleanup(func() { Run(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "up") })
	c, out, errb := mpirun("15", "LD_PRELOAD=/usr/local/bin/lab-altport.so")
	if err := c.Start(); err != nil {
		t.Fatalf("mpirun: %v", err)
	}
	waitTraffic(t, errb)
	armed := 0
	// the QPs carrying traffic read ARMED once their peer's first packet came
	for deadline := time.Now().Add(time.Minute); armed < 2 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		armed = 0
		for _, q := range ibsimRCQPs(t) {
			if q.Str("path_mig_state") == "ARMED" && q.Int("alt_port") == 2 {
				armed++
			}
		}
	}
	midJob(t)
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
	timer := time.AfterFunc(2*time.Minute, func() { _ = c.Process.Kill() })
	err := c.Wait()
	timer.Stop()
	var res struct{ Iterations, Errors int }
	if err != nil || json.Unmarshal([]byte(strings.TrimSpace(out.String())), &res) != nil || res.Iterations == 0 || res.Errors != 0 {
		t.Errorf("mpirun across the port failure with APM armed: %v, result %q, want exit 0 and no data error\nstderr:\n%s", err, out.String(), errb.String())
	}
	if armed == 0 {
		t.Errorf("no Open MPI QP read ARMED on port 2 before the failure")
	}
	lines := altportLines(errb.String())
	loads, exits := 0, 0
	for _, l := range lines {
		switch l.Str("altport") {
		case "modify":
			if l.Int("errno") != 0 || l.Int("alt_port") != 2 || l.Int("alt_ah_port_was") != 0 {
				t.Errorf("Open MPI's alternate load: %v, want alt_port 2 from an AH port of 0, accepted", l)
			}
			loads++
		case "exit":
			if l.Int("async_event_reads") != 0 {
				t.Errorf("an Open MPI rank read its async events: %v", l)
			}
			exits++
		}
	}
	if loads == 0 || exits < 2 {
		t.Errorf("lab-altport.so saw %d alternate loads and %d rank exits\n%s", loads, exits, errb.String())
	}
	time.Sleep(3 * time.Second) // past the rearm deadline of the last migration
	tr.stop(t)
	migrated := map[string]bool{}
	for _, l := range Filter(tr.Lines(), Match("kind", "qp-event", "event", "PATH_MIG")) {
		migrated[l.Str("device")+"/"+fmt.Sprint(l.Int("qpn"))] = true
	}
	missed := map[string]bool{}
	for _, l := range Filter(tr.Lines(), Match("kind", "finding")) {
		key := l.Str("device") + "/" + fmt.Sprint(l.Int("qpn"))
		switch l.Str("finding") {
		case "missed-rearm":
			missed[key] = true
		case "stuck-rearm":
			// an idle QP that rearmed at connect reads REARM until its first packet (info)
		default:
			t.Errorf("finding %v: Open MPI loaded, rearmed, migrated and never rearmed again", l)
		}
	}
	devs := map[string]bool{}
	for k := range migrated {
		devs[strings.Split(k, "/")[0]] = true
		if !missed[k] {
			t.Errorf("QP %s migrated and was never rearmed, and the trace gives no missed-rearm", k)
		}
	}
	if !devs["ibsim0"] || !devs["ibsim1"] {
		t.Errorf("PATH_MIG on %v, want Open MPI's QPs on both HCAs", migrated)
	}
	for k := range missed {
		if !migrated[k] {
			t.Errorf("missed-rearm on %s, which never migrated", k)
		}
	}
	t.Logf("Open MPI: %d QPs ARMED on port 2 before the failure, %d alternate loads, %d QPs migrated, %d missed-rearm",
		armed, loads, len(migrated), len(missed))
	if err := a.Stop(t); err != nil {
		t.Errorf("apmwatch audit: %v\n%s", err, a.Dump())
	}
	n := 0
	for _, f := range readAuditLines(t, filepath.Join(dir, "findings.jsonl")) {
		if f.Type == "finding" && f.Kind == "missed-rearm" {
			n++
		}
	}
	if n != len(missed) {
		t.Errorf("audit gives %d missed-rearm, trace %d", n, len(missed))
	}
}
