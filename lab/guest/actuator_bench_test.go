//go:build labguest

// What the enforcer's action spends its time on, part by part, on one
// lab-ibpair QP (docs/performance.md "Unprotected window").
package guest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/actuator"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// BenchmarkActuatorParts times, 200 calls each, side by side in one run:
// the whole rdma netlink table (every device's QPs and cm_ids and every
// user QP's comm: what each netlink reading of an action cost before), the
// get of the one QP an action reads now (over the socket and device list a
// Finder keeps), the owner lookup (that get and /proc), the resolve of the
// owner's file and handle (get, pidfd, the owner's fds, borrow, QUERY_QP
// of its handles), one QUERY_QP, and a whole `query` operation (resolve,
// QUERY_QP, get again): a rearm's work without its MODIFY_QP.
func BenchmarkActuatorParts(b *testing.B) {
	const calls = 200
	b.Cleanup(func() { resetFabric(b) })
	p := Start(b, "lab-ibpair", "--behavior", "never-rearm")
	ready := p.Ready(b, 2)
	qpn := uint32(QPN(b, ready, "ibsim0"))
	pid := int(ready[0].Int("pid"))
	a := actuator.New(nil)
	var finder rdmanl.Finder // as the actuator keeps one
	defer finder.Close()
	bw, tgt, err := a.Open(pid, "ibsim0", qpn) // borrowed once, for the QUERY_QP alone
	if err != nil {
		b.Fatal(err)
	}
	defer bw.Close()
	handle := tgt.Handle
	e := actuator.NewEnforcer(actuator.DefaultPolicy(), a)
	parts := []struct {
		name string
		call func() error
	}{
		{"netlink-table", func() error {
			s, err := rdmanl.Read()
			if err == nil && len(s.QPs) == 0 {
				err = fmt.Errorf("no qp listed")
			}
			return err
		}},
		{"netlink-get", func() error {
			rows, err := finder.Find("ibsim0", qpn)
			if err == nil && len(rows) != 1 {
				err = fmt.Errorf("%d rows", len(rows))
			}
			return err
		}},
		{"owner", func() error {
			o, err := e.Owner("ibsim0", qpn)
			if err == nil && int(o.PID) != pid {
				err = fmt.Errorf("owner %d, want %d", o.PID, pid)
			}
			return err
		}},
		{"open", func() error { // get, pin, the owner's fds, borrow, handle match
			bw, _, err := a.Open(pid, "ibsim0", qpn)
			if err == nil {
				bw.Close()
			}
			return err
		}},
		{"qp-query", func() error { _, err := bw.Query(handle); return err }},
		{"query-op", func() error {
			_, err := a.Do(context.Background(), actuator.Request{Op: actuator.OpQuery, PID: pid, QPN: qpn, Device: "ibsim0"})
			return err
		}},
	}
	for _, part := range parts {
		start := time.Now()
		for i := 0; i < calls; i++ {
			if err := part.call(); err != nil {
				b.Fatalf("%s: %v", part.name, err)
			}
		}
		us := float64(time.Since(start).Microseconds()) / calls
		b.ReportMetric(us, part.name+"-us/call")
		b.Logf("%s: %.0f us a call (%d calls)", part.name, us, calls)
	}
	if err := p.Stop(b); err != nil {
		b.Fatalf("lab-ibpair: %v", err)
	}
}
