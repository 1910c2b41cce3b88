package rdmanl_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// Netlink snapshots alone make the model judge stuck-rearm, and a QP that
// vanished from the table is forgotten.
func TestFeederIntoModel(t *testing.T) {
	var got []apm.Finding
	m, err := apm.New(apm.DefaultConfig(), func(f apm.Finding) { got = append(got, f) })
	if err != nil {
		t.Fatal(err)
	}
	f := rdmanl.NewFeeder(m)
	rc := func(qpn uint32, mig event.MigState) rdmanl.QP {
		return rdmanl.QP{Device: "mlx5_0", LQPN: qpn, Type: event.QPTypeRC, State: event.StateRTS, PathMig: mig, HasPathMig: true, PID: 9}
	}
	ud := rdmanl.QP{Device: "mlx5_0", LQPN: 5, Type: event.QPTypeUD, State: event.StateRTS}
	for i := range 15 {
		s := rdmanl.Snapshot{Boot: uint64(time.Second) * uint64(i+1),
			QPs:   []rdmanl.QP{rc(100, event.MigRearm), ud},
			CMIDs: []rdmanl.CMID{{Device: "mlx5_0", LQPN: 100}, {Device: "mlx5_0"}}}
		if i < 3 {
			s.QPs = append(s.QPs, rc(101, event.MigArmed))
		}
		f.Feed(s)
	}
	m.Advance(uint64(time.Minute))
	if len(got) != 1 || got[0].Kind != apm.StuckRearm || got[0].QP.QPN != 100 {
		t.Errorf("findings %v: want one stuck-rearm for QP 100", got)
	}
	if s := m.Stats(); s.QPs != 1 {
		t.Errorf("%d QPs tracked, want 1 (101 vanished, UD ignored)", s.QPs)
	}
	if v, ok := m.Lookup("mlx5_0", 100); !ok || !v.CM || v.Mig != event.MigRearm {
		t.Errorf("QP 100 %+v %v: want CM-managed, REARM", v, ok)
	}
}
