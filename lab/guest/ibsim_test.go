//go:build labguest

// The simulated InfiniBand HCA (ibsim0, ibsim1): what ib_core, ib_cm and
// ib_umad make of it, and APM through the real kernel paths. These tests
// need root inside the lab guest (make lab-test).
package guest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ibShow returns what the driver sees (lab-ib show).
func ibShow(t testing.TB) []Line {
	t.Helper()
	return MustRun(t, "lab-ib", "show")
}

// ibQP returns the driver's line for QP qpn of dev (fails if absent).
func ibQP(t testing.TB, dev string, qpn int64) Line {
	t.Helper()
	for _, l := range ibShow(t) {
		if l.Str("dev") == dev && l.Int("qpn") == qpn {
			return l
		}
	}
	t.Fatalf("lab-ib show has no QP %d on %s", qpn, dev)
	return nil
}

// nlQP returns the `rdma -j resource show qp` row of QP qpn of dev.
func nlQP(t *testing.T, dev string, qpn int64) map[string]any {
	t.Helper()
	for _, r := range rdmaToolQPs(t) {
		if fmt.Sprint(r["ifname"]) == dev && fmt.Sprint(r["lqpn"]) == fmt.Sprint(qpn) {
			return r
		}
	}
	t.Fatalf("rdma resource show qp has no QP %d on %s", qpn, dev)
	return nil
}

// waitIB polls the driver's view of a QP until match holds.
func waitIB(t testing.TB, dev string, qpn int64, what string, match func(Line) bool) Line {
	t.Helper()
	deadline := time.Now().Add(evTimeout)
	for {
		l := ibQP(t, dev, qpn)
		if match(l) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s QP %d: not %s within %s: %v", dev, qpn, what, evTimeout, l)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ibEventSeq is the sequence number the driver's next async event will get.
func ibEventSeq(t *testing.T) int64 {
	t.Helper()
	ls := MustRun(t, "lab-ib", "events")
	if len(ls) == 0 {
		return 0
	}
	return ls[len(ls)-1].Int("seq") + 1
}

// resetFabric brings every port and LID back and traffic on (test cleanup).
func resetFabric(t testing.TB) {
	for _, dev := range []string{"ibsim0", "ibsim1"} {
		for _, p := range []string{"1", "2"} {
			Run(t, "lab-ib", "port", "--dev", dev, "--port", p, "up")
		}
	}
	for lid := 1; lid <= 4; lid++ {
		Run(t, "lab-ib", "link", "--lid", fmt.Sprint(lid), "up")
	}
	Run(t, "lab-ib", "traffic", "on")
}

// startIBULP starts the kernel ULP pair on ibsim0 <-> ibsim1 and returns
// the QPNs of both sides.
func startIBULP(t *testing.T, behavior string) (q0, q1 int64) {
	t.Helper()
	qps := startIBULPLines(t, "--behavior", behavior)
	return QPN(t, qps, "ibsim0"), QPN(t, qps, "ibsim1")
}

// startIBULPLines starts the kernel ULP pair on ibsim (lab-ulp start --ib
// and args), stops it and resets the fabric at cleanup, and returns its two
// QP lines.
func startIBULPLines(t *testing.T, args ...string) []Line {
	t.Helper()
	ls := MustRun(t, "lab-ulp", append([]string{"start", "--ib"}, args...)...)
	t.Cleanup(func() {
		Run(t, "lab-ulp", "stop")
		resetFabric(t)
	})
	qps := Filter(ls, Match("kernel", true))
	if len(qps) != 2 {
		t.Fatalf("lab-ulp start --ib %v: want 2 QP lines, got %v", args, ls)
	}
	return qps
}

func readSys(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// The core sees InfiniBand ports with LIDs, and its MAD clients attach:
// ib_cm (cm_* counters), ib_umad (umad devices), ib_mad (a GSI QP per port).
func TestIBSimDevices(t *testing.T) {
	gsi := map[string]bool{}
	for _, r := range rdmaToolQPs(t) {
		if fmt.Sprint(r["type"]) == "GSI" {
			gsi[fmt.Sprintf("%v/%v", r["ifname"], r["port"])] = true
		}
	}
	umad := map[string]bool{}
	ms, _ := filepath.Glob("/sys/class/infiniband_mad/umad*")
	for _, m := range ms {
		dev, err1 := os.ReadFile(m + "/ibdev")
		port, err2 := os.ReadFile(m + "/port")
		if err1 == nil && err2 == nil {
			umad[strings.TrimSpace(string(dev))+"/"+strings.TrimSpace(string(port))] = true
		}
	}
	for d, dev := range []string{"ibsim0", "ibsim1"} {
		for p := 1; p <= 2; p++ {
			dir := fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/", dev, p)
			if ll := readSys(t, dir+"link_layer"); ll != "InfiniBand" {
				t.Errorf("%s port %d link layer %q, want InfiniBand", dev, p, ll)
			}
			if lid, want := readSys(t, dir+"lid"), fmt.Sprintf("0x%x", d*2+p); lid != want {
				t.Errorf("%s port %d LID %s, want %s", dev, p, lid, want)
			}
			if st := readSys(t, dir+"state"); st != "4: ACTIVE" {
				t.Errorf("%s port %d state %q, want 4: ACTIVE", dev, p, st)
			}
			if gid := readSys(t, dir+"gids/0"); !strings.HasPrefix(gid, "fe80:0000:0000:0000:") {
				t.Errorf("%s port %d GID 0 %s, want fe80::/64 + port GUID", dev, p, gid)
			}
			if _, err := os.Stat(dir + "cm_rx_msgs/lap"); err != nil {
				t.Errorf("%s port %d: ib_cm did not attach: %v", dev, p, err)
			}
			key := fmt.Sprintf("%s/%d", dev, p)
			if !umad[key] {
				t.Errorf("%s: no umad device (have %v)", key, umad)
			}
			if !gsi[key] {
				t.Errorf("%s: no GSI QP in rdma resource show qp", key)
			}
		}
	}
}

// rdma-core's own programs find and open the ibsim devices through
// Debian's unmodified libibverbs (its rxe provider binds them by driver
// id): ibv_devinfo shows each port's InfiniBand link layer, LID and state,
// as sysfs does.
func TestIBSimLibibverbsOpensDevices(t *testing.T) {
	out, err := exec.Command("ibv_devices").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ibsim0") || !strings.Contains(string(out), "ibsim1") {
		t.Fatalf("ibv_devices: %v\n%s", err, out)
	}
	for d, dev := range []string{"ibsim0", "ibsim1"} {
		out, err := exec.Command("ibv_devinfo", "-d", dev).CombinedOutput()
		if err != nil {
			t.Fatalf("ibv_devinfo -d %s: %v\n%s", dev, err, out)
		}
		ports := devinfoPorts(string(out))
		for p := 1; p <= 2; p++ {
			f := ports[p]
			if f["link_layer"] != "InfiniBand" || f["port_lid"] != fmt.Sprint(d*2+p) || f["state"] != "PORT_ACTIVE (4)" {
				t.Errorf("%s port %d as ibv_devinfo shows it: %v\n%s", dev, p, f, out)
			}
		}
	}
}

// devinfoPorts reads ibv_devinfo's text: each port's fields by name.
func devinfoPorts(out string) map[int]map[string]string {
	ports := map[int]map[string]string{}
	port := 0
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if k == "port" {
			fmt.Sscan(v, &port)
			ports[port] = map[string]string{}
			continue
		}
		if port != 0 {
			ports[port][k] = v
		}
	}
	return ports
}

// A kernel RC pair on InfiniBand: the RTS->RTS alternate-path load that
// RoCE refuses returns 0, REARM turns ARMED once both sides rearmed and
// traffic flowed (the driver, netlink and QUERY_QP agree), a port DOWN
// migrates both ends once their retries run out (the alternate copied
// into the primary, PATH_MIG seen by the owner), and with both ports down
// the migration fails: with rdmavt's answers the QPs migrate onto the
// dead alternate (PATH_MIG) and go to ERR when its retries run out too;
// with the mlx5 guesses firmware raises PATH_MIG_ERR, then ERR.
func TestIBSimKernelPairAPM(t *testing.T) {
	eachProfile(t, kernelPairAPM)
}

func kernelPairAPM(t *testing.T, profile string) {
	from := nextSeq(t)
	q0, q1 := startIBULP(t, "correct")
	for _, q := range []int64{q0, q1} {
		alt := waitLog(t, from, "alternate-path load", Match("kind", "modify", "what", "alt_path", "qpn", q))
		if alt.Int("ret") != 0 {
			t.Errorf("alternate path load on InfiniBand: %v, want ret 0", alt)
		}
	}
	l0 := waitIB(t, "ibsim0", q0, "ARMED", Match("path_mig_state", "ARMED"))
	waitIB(t, "ibsim1", q1, "ARMED", Match("path_mig_state", "ARMED"))
	if l0.Int("port") != 1 || l0.Int("dlid") != 3 || l0.Int("alt_port") != 2 || l0.Int("alt_dlid") != 4 {
		t.Errorf("ibsim0 QP paths %v, want port 1 -> LID 3, alternate port 2 -> LID 4", l0)
	}
	for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
		if r := nlQP(t, dev, q); fmt.Sprint(r["path-mig-state"]) != "ARMED" {
			t.Errorf("netlink %s QP %d: %v, want path-mig-state ARMED", dev, q, r)
		}
	}
	for _, s := range Filter(MustRun(t, "lab-ulp", "status"), Match("kernel", true)) {
		if s.Str("path_mig_state") != "ARMED" {
			t.Errorf("ib_query_qp: %v, want ARMED", s)
		}
	}

	t.Run("port-down-migrates-both-ends", func(t *testing.T) {
		from := nextSeq(t)
		MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
		for _, q := range []int64{q0, q1} {
			waitLog(t, from, "PATH_MIG", Match("kind", "event", "event", "PATH_MIG", "qpn", q))
		}
		a := ibQP(t, "ibsim0", q0)
		b := ibQP(t, "ibsim1", q1)
		if a.Int("port") != 2 || a.Int("dlid") != 4 || b.Int("port") != 2 || b.Int("dlid") != 2 {
			t.Errorf("after the migration: %v and %v, want both on port 2 (DLIDs 4 and 2)", a, b)
		}
		if a.Int("migrations") != 1 || b.Int("migrations") != 1 {
			t.Errorf("migrations %v / %v, want 1 each", a, b)
		}
		// The ULP reacts: a new alternate (back on port 1) loads with 0, then rearms.
		for _, q := range []int64{q0, q1} {
			alt := waitLog(t, from, "alternate-path reload", Match("kind", "modify", "what", "alt_path", "qpn", q))
			if alt.Int("ret") != 0 {
				t.Errorf("alternate path reload: %v, want ret 0", alt)
			}
		}
		waitIB(t, "ibsim0", q0, "re-ARMED", Match("path_mig_state", "ARMED"))
		waitIB(t, "ibsim1", q1, "re-ARMED", Match("path_mig_state", "ARMED"))
	})

	t.Run("both-ports-down-migration-fails", func(t *testing.T) {
		from := nextSeq(t)
		// The alternate now runs through ibsim0 port 1, which is still down.
		MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "2", "down")
		want, never := "PATH_MIG", "PATH_MIG_ERR"
		if profile == "mlx5" {
			want, never = never, want
		}
		for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
			waitLog(t, from, want, Match("kind", "event", "event", want, "qpn", q))
			waitIB(t, dev, q, "ERR", Match("state", "ERR"))
			if r := nlQP(t, dev, q); fmt.Sprint(r["state"]) != "ERR" {
				t.Errorf("netlink %s QP %d: %v, want state ERR", dev, q, r)
			}
		}
		if m := Filter(ulpLog(t, from), Match("kind", "event", "event", never)); len(m) != 0 {
			t.Errorf("%s profile: %s raised: %v", profile, never, m)
		}
	})
}

// A QP that is not armed when its primary path fails goes to ERR, with no
// migration event. The LID failure is in the switch: no port event.
func TestIBSimUnarmedGoesToErr(t *testing.T) {
	q0, q1 := startIBULP(t, "no-rearm")
	waitIB(t, "ibsim0", q0, "ARMED", Match("path_mig_state", "ARMED"))
	waitIB(t, "ibsim1", q1, "ARMED", Match("path_mig_state", "ARMED"))
	from, evFrom := nextSeq(t), ibEventSeq(t)
	MustRun(t, "lab-ib", "link", "--lid", "3", "down")
	for _, q := range []int64{q0, q1} {
		waitLog(t, from, "PATH_MIG", Match("kind", "event", "event", "PATH_MIG", "qpn", q))
	}
	// no-rearm: both stay MIGRATED on port 2; now that path fails too.
	waitIB(t, "ibsim0", q0, "MIGRATED", Match("path_mig_state", "MIGRATED", "port", 2))
	MustRun(t, "lab-ib", "link", "--lid", "4", "down")
	waitIB(t, "ibsim0", q0, "ERR", Match("state", "ERR"))
	waitIB(t, "ibsim1", q1, "ERR", Match("state", "ERR"))
	if m := Filter(ulpLog(t, from), Match("kind", "event", "event", "PATH_MIG_ERR")); len(m) != 0 {
		t.Errorf("an unarmed QP raised PATH_MIG_ERR: %v", m)
	}
	for _, e := range MustRun(t, "lab-ib", "events") {
		if e.Int("seq") >= evFrom && e.Has("port") && e.Str("event") == "PORT_ERR" {
			t.Errorf("a LID link failure raised a port event: %v", e)
		}
	}
}

// REARM turns ARMED only when a packet with MigReq=0 arrives from the peer:
// with traffic off both sides stay REARM; one request from ibsim0 arms
// ibsim1's QP, and its ACK (MigReq=0: ibsim1 was REARM) arms ibsim0's.
func TestIBSimRearmNeedsPeerPacket(t *testing.T) {
	MustRun(t, "lab-ib", "traffic", "off")
	q0, q1 := startIBULP(t, "correct")
	time.Sleep(300 * time.Millisecond)
	for dev, q := range map[string]int64{"ibsim0": q0, "ibsim1": q1} {
		if l := ibQP(t, dev, q); l.Str("path_mig_state") != "REARM" {
			t.Errorf("%s QP without traffic: %v, want REARM", dev, l)
		}
		if r := nlQP(t, dev, q); fmt.Sprint(r["path-mig-state"]) != "REARM" {
			t.Errorf("netlink %s QP %d: %v, want REARM", dev, q, r)
		}
	}
	MustRun(t, "lab-ib", "traffic", "poke", "--dev", "ibsim0", "--qpn", fmt.Sprint(q0)) // the same as poke
	a, b := ibQP(t, "ibsim0", q0), ibQP(t, "ibsim1", q1)
	if a.Str("path_mig_state") != "ARMED" || b.Str("path_mig_state") != "ARMED" || a.Int("tx") != 1 || b.Int("tx") != 0 || a.Int("acks") != 1 {
		t.Errorf("after one request ibsim0 -> ibsim1: %v / %v, want both ARMED, one request and its ACK", a, b)
	}
}

func TestIBSimControlErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"port", "--dev", "nosuch", "--port", "1", "down"}, 1, "no ibsim device named nosuch"},
		{[]string{"port", "--dev", "ibsim0", "--port", "3", "down"}, 1, "port ibsim0/3"},
		{[]string{"link", "--lid", "99", "down"}, 1, "LID 99: no such QP or LID"},
		{[]string{"poke", "--dev", "ibsim0", "--qpn", "999999"}, 1, "no such QP"},
		{[]string{"traffic", "poke", "--dev", "ibsim0", "--qpn", "999999"}, 1, "no such QP"},
		{[]string{"traffic", "sideways"}, 2, "traffic needs on|off"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"lmc", "4"}, 2, "lmc needs N, 0 to 3"},
		{[]string{"lmc"}, 2, "lmc needs N, 0 to 3"},
	}
	for _, c := range cases {
		r := Run(t, "lab-ib", c.args...)
		if r.Code != c.code || !strings.Contains(r.Stderr, c.msg) {
			t.Errorf("lab-ib %v: exit %d stderr %q, want exit %d and %q", c.args, r.Code, r.Stderr, c.code, c.msg)
		}
	}
}

// cmCounter sums a CM counter over both ports of dev (dir: rx or tx).
func cmCounter(t *testing.T, dev, dir, name string) int64 {
	t.Helper()
	var n int64
	for p := 1; p <= 2; p++ {
		path := fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/cm_%s_msgs/%s", dev, p, dir, name)
		v, err := ReadInt(path)
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		n += v
	}
	return n
}

// The real ib_cm connects the pair over the simulated fabric with the
// alternate path in the REQ (the CM loads it at RTR and asks for REARM at
// RTS), both QPs reach ARMED, a LAP sent through umad with lab-lap is
// accepted by the CM (IB_CM_LAP_RECEIVED at the ULP, lap_state RCVD) and,
// while it is pending, ib_cm_notify(PATH_MIG) returns -EINVAL on that side
// only; the disconnect sends a DREQ.
func TestIBSimCMLapPending(t *testing.T) {
	before := map[string]int64{}
	for _, m := range []string{"req", "rep", "rtu", "lap", "dreq"} {
		before["ibsim1 rx "+m] = cmCounter(t, "ibsim1", "rx", m)
		before["ibsim0 rx "+m] = cmCounter(t, "ibsim0", "rx", m)
	}
	from := nextSeq(t)
	qps := startIBULPLines(t, "--cm")
	q0, q1 := QPN(t, qps, "ibsim0"), QPN(t, qps, "ibsim1")
	var id0, id1 int64
	for _, q := range qps {
		if q.Str("dev") == "ibsim0" {
			id0 = q.Int("local_comm_id")
		} else {
			id1 = q.Int("local_comm_id")
		}
	}
	for _, q := range []int64{q0, q1} {
		rtr := waitLog(t, from, "CM RTR modify", Match("kind", "modify", "what", "cm_rtr", "qpn", q))
		if rtr.Int("ret") != 0 || rtr.Int("mask")&0x4000 == 0 {
			t.Errorf("CM RTR modify %v: want ret 0 with IB_QP_ALT_PATH (0x4000) in the mask", rtr)
		}
	}
	if d := cmCounter(t, "ibsim1", "rx", "req") - before["ibsim1 rx req"]; d != 1 {
		t.Errorf("ibsim1 received %d REQs, want 1", d)
	}
	if d := cmCounter(t, "ibsim0", "rx", "rep") - before["ibsim0 rx rep"]; d != 1 {
		t.Errorf("ibsim0 received %d REPs, want 1", d)
	}
	if d := cmCounter(t, "ibsim1", "rx", "rtu") - before["ibsim1 rx rtu"]; d != 1 {
		t.Errorf("ibsim1 received %d RTUs, want 1", d)
	}
	waitIB(t, "ibsim0", q0, "ARMED", Match("path_mig_state", "ARMED"))
	waitIB(t, "ibsim1", q1, "ARMED", Match("path_mig_state", "ARMED"))

	lap := MustRun(t, "lab-lap", "--dev", "ibsim0", "--to", "ibsim1",
		"--local-comm-id", fmt.Sprint(id0), "--remote-comm-id", fmt.Sprint(id1),
		"--remote-qpn", fmt.Sprint(q1))
	if c := Filter(lap, Match("counted", true)); len(c) != 1 {
		t.Fatalf("lab-lap: the LAP was not counted by ibsim1: %v", lap)
	}
	waitLog(t, from, "IB_CM_LAP_RECEIVED", Match("kind", "note", "what", "cm_lap_received", "qpn", q1))
	for _, s := range Filter(MustRun(t, "lab-ulp", "status"), Match("dev", "ibsim1")) {
		if s.Int("lap_state") != 3 {
			t.Errorf("ibsim1 cm_id after the LAP: %v, want lap_state 3 (IB_CM_LAP_RCVD)", s)
		}
	}

	from = nextSeq(t)
	MustRun(t, "lab-ib", "port", "--dev", "ibsim1", "--port", "1", "down")
	n1 := waitLog(t, from, "ib_cm_notify on ibsim1", Match("kind", "note", "what", "cm_notify_path_mig", "qpn", q1))
	n0 := waitLog(t, from, "ib_cm_notify on ibsim0", Match("kind", "note", "what", "cm_notify_path_mig", "qpn", q0))
	if n1.Int("ret") != -22 || n0.Int("ret") != 0 {
		t.Errorf("ib_cm_notify(PATH_MIG): ibsim1 %v (LAP pending), ibsim0 %v; want -22 and 0", n1, n0)
	}

	MustRun(t, "lab-ulp", "stop")
	deadline := time.Now().Add(evTimeout)
	for cmCounter(t, "ibsim1", "rx", "dreq")-before["ibsim1 rx dreq"] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("ibsim1 received no DREQ after the disconnect")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With no-notify the CM user never calls ib_cm_notify on a migration (the
// CM keeps the dead path as its address vector); the QPs still migrate.
func TestIBSimCMNoNotify(t *testing.T) {
	ls := MustRun(t, "lab-ulp", "start", "--ib", "--cm", "--behavior", "no-notify")
	t.Cleanup(func() {
		Run(t, "lab-ulp", "stop")
		resetFabric(t)
	})
	qps := Filter(ls, Match("kernel", true))
	if len(qps) != 2 {
		t.Fatalf("lab-ulp start: %v", ls)
	}
	q0 := QPN(t, qps, "ibsim0")
	waitIB(t, "ibsim0", q0, "ARMED", Match("path_mig_state", "ARMED"))
	from := nextSeq(t)
	MustRun(t, "lab-ib", "link", "--lid", "1", "down")
	waitLog(t, from, "PATH_MIG", Match("kind", "event", "event", "PATH_MIG", "qpn", q0))
	waitLog(t, from, "rearm", Match("kind", "modify", "what", "rearm", "qpn", q0))
	if m := Filter(ulpLog(t, from), Match("what", "cm_notify_path_mig")); len(m) != 0 {
		t.Errorf("no-notify called ib_cm_notify: %v", m)
	}
}
