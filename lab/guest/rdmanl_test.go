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

func TestRdmanlMatchesRdmaTool(t *testing.T) {
	p, ready := startPair(t, "--behavior", "rearm")
	defer p.Stop(t)
	pair := map[string]int64{"rxe0": QPN(t, ready, "rxe0"), "rxe1": QPN(t, ready, "rxe1")}

	snap, err := rdmanl.Read()
	if err != nil {
		t.Fatal(err)
	}
	tool := rdmaToolQPs(t)
	mine := map[string]rdmanl.QP{}
	for _, q := range snap.QPs {
		mine[fmt.Sprintf("%s/%d", q.Device, q.LQPN)] = q
	}
	if len(tool) != len(snap.QPs) {
		t.Errorf("rdma tool lists %d QPs, rdmanl %d", len(tool), len(snap.QPs))
	}
	for _, row := range tool {
		key := fmt.Sprintf("%v/%v", row["ifname"], row["lqpn"])
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
	// The lab pair's QPs are RC, in RTS, armed by lab-pair's REARM.
	for dev, qpn := range pair {
		q, ok := mine[fmt.Sprintf("%s/%d", dev, qpn)]
		if !ok {
			t.Fatalf("lab-pair QP %s/%d not listed", dev, qpn)
		}
		if q.Type != event.QPTypeRC || q.State != event.StateRTS || !q.HasPathMig || q.PathMig != event.MigRearm || q.Comm != "lab-pair" {
			t.Errorf("lab-pair QP %+v: want RC, RTS, REARM, comm lab-pair", q)
		}
	}
}
