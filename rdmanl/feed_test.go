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
	f := rdmanl.NewFeeder()
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
		for _, e := range f.Events(s) {
			m.Handle(e)
		}
	}
	m.Finish(uint64(time.Minute))
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

// The events of a snapshot carry the row: owner, remote QPN, CM binding,
// kernel or user; QPs that vanished come last, in a stable order.
func TestFeederEvents(t *testing.T) {
	f := rdmanl.NewFeeder()
	rows := []rdmanl.QP{
		{Device: "rxe0", LQPN: 17, RQPN: 18, Type: event.QPTypeRC, State: event.StateRTS, PathMig: event.MigArmed, HasPathMig: true, PID: 207, Comm: "lab-pair"},
		{Device: "rxe0", LQPN: 19, Type: event.QPTypeRC, State: event.StateRTS, PathMig: event.MigRearm, HasPathMig: true, Kernel: true, Comm: "apmlab"},
		{Device: "rxe1", LQPN: 3, Type: event.QPTypeRC, State: event.StateRTS, HasPathMig: true},
		{Device: "rxe0", LQPN: 5, Type: event.QPTypeUD, State: event.StateRTS},
	}
	evs := f.Events(rdmanl.Snapshot{Boot: 100, QPs: rows, CMIDs: []rdmanl.CMID{{Device: "rxe0", LQPN: 19, Kernel: true, Comm: "apmlab"}}})
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3 (the UD QP has no mig state)", len(evs))
	}
	e := evs[0]
	want := event.Truth{Op: event.TruthRead, Source: "netlink", QPType: event.QPTypeRC, Origin: event.OriginUser,
		State: event.StateRTS, HasState: true, Mig: event.MigArmed, RQPN: 18, Span: 1} // a dump of no measured length: 1 ns (0 means unknown)
	if e.Kind != event.KindTruth || e.Boot != 100 || e.Seq != 0 || e.PID != 207 || e.Comm != "lab-pair" ||
		e.Device != "rxe0" || e.QPN != 17 || *e.Truth != want {
		t.Errorf("reading %+v %+v, want %+v", e, e.Truth, want)
	}
	if k := evs[1].Truth; !k.CM || k.Origin != event.OriginKernel || evs[1].Comm != "apmlab" {
		t.Errorf("kernel QP with a cm_id: %+v", k)
	}
	evs = f.Events(rdmanl.Snapshot{Boot: 200, QPs: rows[1:2]})
	if len(evs) != 3 || evs[0].QPN != 19 {
		t.Fatalf("second snapshot: %d events", len(evs))
	}
	for i, qpn := range []uint32{17, 3} {
		g := evs[1+i]
		if g.Truth.Op != event.TruthGone || g.QPN != qpn || g.Boot != 200 {
			t.Errorf("event %d: %+v %+v, want rxe0/17 then rxe1/3 gone", 1+i, g, g.Truth)
		}
	}
}

// A QP the probes saw that a later snapshot does not list is gone, even if
// no snapshot listed it (its destroy was lost); one seen after the snapshot
// was taken, or destroyed in view, is not.
func TestFeederGoneForQPsTheProbesSaw(t *testing.T) {
	f := rdmanl.NewFeeder()
	ud := rdmanl.QP{Device: "rxe0", LQPN: 5, Type: event.QPTypeUD, State: event.StateRTS}
	f.Saw(&event.Event{Kind: event.KindQPCreate, Device: "rxe0", QPN: 5, Boot: 50, Life: &event.QPLife{}})
	f.Saw(&event.Event{Kind: event.KindQPCreate, Device: "rxe0", QPN: 17, Boot: 50, Life: &event.QPLife{}})
	f.Saw(&event.Event{Kind: event.KindModify, Device: "rxe0", QPN: 18, Boot: 60})
	f.Saw(&event.Event{Kind: event.KindQPDestroy, Device: "rxe0", QPN: 18, Boot: 70, Life: &event.QPLife{}})
	f.Saw(&event.Event{Kind: event.KindModify, Device: "rxe0", QPN: 19, Boot: 150})
	f.Saw(&event.Event{Kind: event.KindTruth, Device: "rxe0", QPN: 20, Boot: 10, Truth: &event.Truth{Op: event.TruthRead}})
	evs := f.Events(rdmanl.Snapshot{Boot: 100, QPs: []rdmanl.QP{ud}})
	if len(evs) != 1 || evs[0].QPN != 17 || evs[0].Truth.Op != event.TruthGone || evs[0].Boot != 100 {
		t.Fatalf("events %+v: want rxe0/17 gone only (5 listed, 18 destroyed, 19 after the snapshot, 20 a reading)", evs)
	}
	if evs = f.Events(rdmanl.Snapshot{Boot: 200}); len(evs) != 2 || evs[0].QPN != 5 || evs[1].QPN != 19 {
		t.Fatalf("second snapshot %+v: want 5 and 19 gone, 17 not again", evs)
	}
	if evs = f.Events(rdmanl.Snapshot{Boot: 300}); len(evs) != 0 {
		t.Fatalf("third snapshot %+v: nothing left to report", evs)
	}
}

// An rdma_cm id that outlives its QP (rdma_destroy_qp leaves its qp_num)
// marks only that QP generation as CM-driven: a later QP reusing the QPN is
// not, unless a cm_id binds it anew.
func TestFeederCMIDOutlivesQP(t *testing.T) {
	cmOf := func(evs []*event.Event, qpn uint32) bool {
		for _, e := range evs {
			if e.Truth != nil && e.Truth.Op == event.TruthRead && e.QPN == qpn {
				return e.Truth.CM
			}
		}
		t.Fatalf("no reading of qp %d", qpn)
		return false
	}
	row := rdmanl.QP{Device: "mlx5_0", LQPN: 17, Type: event.QPTypeRC, HasPathMig: true, State: event.StateRTS}
	old := rdmanl.CMID{Device: "mlx5_0", ID: 5, LQPN: 17}
	for _, tc := range []struct {
		name  string
		ended func(f *rdmanl.Feeder)
		ids   []rdmanl.CMID
		want  bool
	}{
		{"the QP lives on: still CM", func(*rdmanl.Feeder) {}, []rdmanl.CMID{old}, true},
		{"destroyed and the QPN reused: the old cm_id's row does not mark it", func(f *rdmanl.Feeder) {
			f.Saw(&event.Event{Kind: event.KindQPDestroy, Device: "mlx5_0", QPN: 17, Life: &event.QPLife{}})
		}, []rdmanl.CMID{old}, false},
		{"destroyed, reused, and a new cm_id binds it: CM", func(f *rdmanl.Feeder) {
			f.Saw(&event.Event{Kind: event.KindQPDestroy, Device: "mlx5_0", QPN: 17, Life: &event.QPLife{}})
		}, []rdmanl.CMID{old, {Device: "mlx5_0", ID: 6, LQPN: 17}}, true},
		{"gone between snapshots, then listed again: not CM by the old row", func(f *rdmanl.Feeder) {
			f.Events(rdmanl.Snapshot{Boot: 150, CMIDs: []rdmanl.CMID{old}})
		}, []rdmanl.CMID{old}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := rdmanl.NewFeeder()
			if !cmOf(f.Events(rdmanl.Snapshot{Boot: 100, QPs: []rdmanl.QP{row}, CMIDs: []rdmanl.CMID{old}}), 17) {
				t.Fatal("the first generation is not CM")
			}
			tc.ended(f)
			if got := cmOf(f.Events(rdmanl.Snapshot{Boot: 200, QPs: []rdmanl.QP{row}, CMIDs: tc.ids}), 17); got != tc.want {
				t.Fatalf("cm %v, want %v", got, tc.want)
			}
		})
	}
}

// A cm_id's QPN counts for a QP only while the cm_id's QP is that
// generation: a QP created after the binding was seen, or one of an owner
// of another kind, is not CM-driven by it.
func TestFeederCMIDOtherOwner(t *testing.T) {
	cmOf := func(evs []*event.Event, qpn uint32) bool {
		for _, e := range evs {
			if e.Truth != nil && e.Truth.Op == event.TruthRead && e.QPN == qpn {
				return e.Truth.CM
			}
		}
		t.Fatalf("no reading of qp %d", qpn)
		return false
	}
	user := rdmanl.QP{Device: "mlx5_0", LQPN: 17, Type: event.QPTypeRC, HasPathMig: true, State: event.StateRTS, PID: 300}
	kern := user
	kern.PID, kern.Kernel, kern.Comm = 0, true, "ib_srpt"
	for _, tc := range []struct {
		name string
		qp   rdmanl.QP
		id   rdmanl.CMID
		// created: a QP with the cm_id's QPN is created (the probes saw
		// it) between the first snapshot and the second
		created uint64
		want    bool
	}{
		{"a user process's cm_id and QP", user, rdmanl.CMID{Device: "mlx5_0", ID: 5, LQPN: 17, PID: 300}, 0, true},
		{"a kernel ULP's cm_id and QP", kern, rdmanl.CMID{Device: "mlx5_0", ID: 5, LQPN: 17, Kernel: true, Comm: "ib_srpt"}, 0, true},
		{"a kernel ULP's lingering cm_id, a user process's verbs QP with its old QPN", user,
			rdmanl.CMID{Device: "mlx5_0", ID: 5, LQPN: 17, Kernel: true, Comm: "ib_srpt"}, 0, false},
		{"a user's lingering cm_id, a kernel QP with its old QPN", kern, rdmanl.CMID{Device: "mlx5_0", ID: 5, LQPN: 17, PID: 300}, 0, false},
		{"the QPN created anew after the binding was seen, destroy unseen", user, rdmanl.CMID{Device: "mlx5_0", ID: 5, LQPN: 17, PID: 300}, 150, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := rdmanl.NewFeeder()
			first := cmOf(f.Events(rdmanl.Snapshot{Boot: 100, QPs: []rdmanl.QP{tc.qp}, CMIDs: []rdmanl.CMID{tc.id}}), 17)
			if tc.created != 0 {
				if !first {
					t.Fatal("the first generation is not CM")
				}
				f.Saw(&event.Event{Kind: event.KindQPCreate, Boot: tc.created, Device: "mlx5_0", QPN: 17, Life: &event.QPLife{}})
			}
			if got := cmOf(f.Events(rdmanl.Snapshot{Boot: 200, QPs: []rdmanl.QP{tc.qp}, CMIDs: []rdmanl.CMID{tc.id}}), 17); got != tc.want {
				t.Fatalf("cm %v, want %v", got, tc.want)
			}
		})
	}
}
