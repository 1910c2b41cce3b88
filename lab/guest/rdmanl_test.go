//go:build labguest

// rdmanl against the rdma tool on the lab kernels: the pure-Go netlink
// reader must see every QP `rdma resource show qp -j` sees, with the same
// fields.
package guest

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
)

func rdmaToolQPs(t *testing.T) []map[string]any {
	t.Helper()
	out, err := exec.Command("rdma", "-j", "resource", "show", "qp").Output()
	if err != nil {
		t.Fatalf("rdma -j resource show qp: %v", err)
	}
	d := json.NewDecoder(strings.NewReader(string(out)))
	d.UseNumber()
	var rows []map[string]any
	if err := d.Decode(&rows); err != nil {
		t.Fatalf("rdma tool output %q: %v", out, err)
	}
	return rows
}

// qpKey names a QP: QPNs are per device, except QP0/QP1, one per port
// (ibsim has two ports).
func qpKey(dev, port, lqpn any) string {
	return fmt.Sprintf("%v/%v/%v", dev, port, lqpn)
}

func TestRdmanlMatchesRdmaTool(t *testing.T) {
	p, ready := startPair(t, "--behavior", "rearm")
	defer p.Stop(t)
	pair := map[string]int64{"rxe0": QPN(t, ready, "rxe0"), "rxe1": QPN(t, ready, "rxe1")}
	// The apmlab kernel ULP adds kernel RC QPs (a kernel name, no pid).
	MustRun(t, "lab-ulp", "start")
	defer Run(t, "lab-ulp", "stop")

	snap, err := rdmanl.Read()
	if err != nil {
		t.Fatal(err)
	}
	tool := rdmaToolQPs(t)
	mine := map[string]rdmanl.QP{}
	for _, q := range snap.QPs {
		mine[qpKey(q.Device, q.Port, q.LQPN)] = q
	}
	t.Logf("rdma tool: %d QPs, rdmanl: %d QPs", len(tool), len(snap.QPs))
	for _, q := range snap.QPs {
		t.Logf("  %s/%d port %d %s %s mig %s (has %v) rqpn %d sq-psn %d rq-psn %d pid %d comm %q kernel %v",
			q.Device, q.LQPN, q.Port, q.Type, q.State, q.PathMig, q.HasPathMig, q.RQPN, q.SQPSN, q.RQPSN, q.PID, q.Comm, q.Kernel)
	}
	if len(tool) != len(snap.QPs) {
		t.Errorf("rdma tool lists %d QPs, rdmanl %d", len(tool), len(snap.QPs))
	}
	for _, row := range tool {
		key := qpKey(row["ifname"], row["port"], row["lqpn"])
		q, ok := mine[key]
		if !ok {
			t.Errorf("rdmanl misses %s: %v", key, row)
			continue
		}
		check := func(field string, got any) {
			if v, ok := row[field]; ok && fmt.Sprint(v) != fmt.Sprint(got) {
				t.Errorf("%s %s: rdma tool %v, rdmanl %v", key, field, v, got)
			}
		}
		check("port", q.Port)
		check("rqpn", q.RQPN)
		check("rq-psn", q.RQPSN)
		check("sq-psn", q.SQPSN)
		check("state", q.State)
		check("pid", q.PID)
		if q.HasPathMig {
			check("path-mig-state", q.PathMig)
		} else if _, ok := row["path-mig-state"]; ok {
			t.Errorf("%s: rdma tool shows path-mig-state, rdmanl none", key)
		}
		if s := q.Type.String(); !strings.HasPrefix(s, "TYPE(") {
			check("type", s)
		}
		if c, ok := row["comm"]; ok && strings.Trim(fmt.Sprint(c), "[]") != q.Comm {
			t.Errorf("%s comm: rdma tool %v, rdmanl %q", key, c, q.Comm)
		}
	}
	kernelRC := 0
	for _, q := range snap.QPs {
		if q.Kernel && q.Type == event.QPTypeRC && q.HasPathMig && q.PID == 0 {
			kernelRC++
		}
	}
	if kernelRC < 2 {
		t.Errorf("%d kernel RC QPs with a path-mig-state, want the ULP's 2", kernelRC)
	}
	// The lab pair's QPs are RC, in RTS, armed by lab-pair's REARM.
	for dev, qpn := range pair {
		q, ok := mine[qpKey(dev, 1, qpn)]
		if !ok {
			t.Fatalf("lab-pair QP %s/%d not listed", dev, qpn)
		}
		if q.Type != event.QPTypeRC || q.State != event.StateRTS || !q.HasPathMig || q.PathMig != event.MigRearm || q.Comm != "lab-pair" {
			t.Errorf("lab-pair QP %+v: want RC, RTS, REARM, comm lab-pair", q)
		}
	}
	// A get of one QP by number answers with the row the dump lists, on
	// the device named or on every device; a number no QP has, with none.
	for _, q := range snap.QPs {
		if q.Type != event.QPTypeRC {
			continue // QP0/QP1 are kept by number and port: not found by number alone
		}
		for _, dev := range []string{q.Device, ""} {
			rows, err := rdmanl.Find(dev, q.LQPN)
			if err != nil {
				t.Fatalf("find %q/%d: %v", dev, q.LQPN, err)
			}
			var hit *rdmanl.QP
			for i := range rows {
				if rows[i].Device == q.Device {
					hit = &rows[i]
				}
			}
			if hit == nil || (dev != "" && len(rows) != 1) {
				t.Errorf("find %q/%d: %+v, want the dump's row %+v", dev, q.LQPN, rows, q)
			} else if *hit != q {
				t.Errorf("find %q/%d:\n got %+v\nwant %+v (the dump's)", dev, q.LQPN, *hit, q)
			}
		}
	}
	if rows, err := rdmanl.Find("rxe0", 0xfffff0); err != nil || len(rows) != 0 {
		t.Errorf("find of a qp number nobody has: %+v, %v", rows, err)
	}
	if rows, err := rdmanl.Find("nosuchdev", uint32(pair["rxe0"])); err != nil || len(rows) != 0 {
		t.Errorf("find on a device that does not exist: %+v, %v", rows, err)
	}
}

// The ground truth the APM model needs: after an injected PATH_MIG with the
// HCA's move (--migrate) the QP reads MIGRATED; after one without it (an
// event without a migration) it still reads REARM.
func TestRdmanlSeesMigration(t *testing.T) {
	p, ready := startPair(t, "--behavior", "never-rearm")
	defer p.Stop(t)
	q0, q1 := QPN(t, ready, "rxe0"), QPN(t, ready, "rxe1")
	Inject(t, "rxe0", q0, "path_mig", true)
	Inject(t, "rxe1", q1, "path_mig", false)
	snap, err := rdmanl.Read()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]event.MigState{fmt.Sprintf("rxe0/%d", q0): event.MigMigrated, fmt.Sprintf("rxe1/%d", q1): event.MigRearm}
	for _, q := range snap.QPs {
		k := fmt.Sprintf("%s/%d", q.Device, q.LQPN)
		if w, ok := want[k]; ok {
			if !q.HasPathMig || q.PathMig != w || q.State != event.StateRTS {
				t.Errorf("%s reads %s %s, want RTS %s", k, q.State, q.PathMig, w)
			}
			delete(want, k)
		}
	}
	if len(want) != 0 {
		t.Errorf("not listed: %v", want)
	}
}

// rdma_cm's cm_ids name the QPs they drive: that is how the APM model learns
// that a QP is CM-managed without having seen its connection.
func TestRdmanlCMIDs(t *testing.T) {
	p := Start(t, "lab-cm-pair", "--behavior", "rearm", "--duration", "2m")
	defer p.Stop(t)
	ready := p.Ready(t, 2)
	q := QPN(t, ready, "rxe0")
	snap, err := rdmanl.Read()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("rdma", "-j", "resource", "show", "cm_id").Output()
	if err != nil {
		t.Fatalf("rdma resource show cm_id: %v", err)
	}
	var tool []map[string]any
	if err := json.Unmarshal(out, &tool); err != nil {
		t.Fatalf("rdma tool output %q: %v", out, err)
	}
	t.Logf("rdma tool: %d cm_ids, rdmanl: %d", len(tool), len(snap.CMIDs))
	if len(tool) != len(snap.CMIDs) {
		t.Errorf("rdma tool lists %d cm_ids, rdmanl %d", len(tool), len(snap.CMIDs))
	}
	found := false
	for _, c := range snap.CMIDs {
		t.Logf("  %+v", c)
		if c.Device == "rxe0" && int64(c.LQPN) == q {
			found = true
		}
	}
	if !found {
		t.Errorf("no cm_id for lab-cm-pair's QP rxe0/%d", q)
	}
}

// A Finder keeps its socket and device list between calls; a device
// renamed since then is found under its new name, and no longer under the
// old one (the get's answer names the device: the list is read again).
func TestRdmanlFinderFollowsRename(t *testing.T) {
	p, ready := startPair(t, "--behavior", "rearm")
	defer p.Stop(t)
	qpn := uint32(QPN(t, ready, "rxe1"))
	var f rdmanl.Finder
	defer f.Close()
	if rows, err := f.Find("rxe1", qpn); err != nil || len(rows) != 1 || rows[0].Comm != "lab-pair" {
		t.Fatalf("before the rename: %+v, %v", rows, err)
	}
	MustRun(t, "rdma", "dev", "set", "rxe1", "name", "lab-renamed")
	defer MustRun(t, "rdma", "dev", "set", "lab-renamed", "name", "rxe1")
	if rows, err := f.Find("rxe1", qpn); err != nil || len(rows) != 0 {
		t.Errorf("under the old name: %+v, %v; want none", rows, err)
	}
	if rows, err := f.Find("lab-renamed", qpn); err != nil || len(rows) != 1 || rows[0].Device != "lab-renamed" || rows[0].LQPN != qpn {
		t.Errorf("under the new name: %+v, %v", rows, err)
	}
}

// TestRdmanlFinderResetQP: a QP in RESET has no port yet (ib_core sets
// qp->port on the modify that names one), so a get naming any port is
// answered EAGAIN; the Finder falls back to the device's dump and finds
// it there, port 0 and all.
func TestRdmanlFinderResetQP(t *testing.T) {
	p, ready := startPair(t, "--no-connect")
	defer p.Stop(t)
	qpn := uint32(QPN(t, ready, "rxe0"))
	if st := Filter(p.Lines(), Match("query", "after_setup", "dev", "rxe0", "qpn", int64(qpn))); len(st) != 1 || st[0].Str("qp_state") != "RESET" {
		t.Fatalf("lab-pair --no-connect: %v, want the QP in RESET", st)
	}
	var f rdmanl.Finder
	defer f.Close()
	rows, err := f.Find("rxe0", qpn)
	if err != nil || len(rows) != 1 {
		t.Fatalf("find qp %d in RESET: %+v, %v; want one row", qpn, rows, err)
	}
	r := rows[0]
	if r.LQPN != qpn || r.Device != "rxe0" || r.State != event.StateReset || r.Port != 0 || r.Comm != "lab-pair" || r.Type != event.QPTypeRC {
		t.Errorf("qp %d in RESET: %+v; want rxe0, RESET, port 0, lab-pair's RC QP", qpn, r)
	}
	if rows, err := f.Find("", qpn); err != nil || len(rows) == 0 {
		t.Errorf("find qp %d in RESET on every device: %+v, %v", qpn, rows, err)
	}
}
