package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// driverCopy is what mlx5_ib_qp_event or mlx4_ib_qp_event give: the QPN
// and the event, no device name and no QP type (zero reads as SMI).
func driverCopy(b *apmtest.Builder, qpn uint32, t event.EventType) *event.Event {
	ev := b.Add(&event.Event{Kind: event.KindQPEvent, QPN: qpn,
		QP: &event.QPEvent{Type: t, Hook: "mlx5_ib_qp_event"}})
	ev.Device = ""
	return ev
}

// kernelULP is a kernel QP armed the way the CM sets it up (ib_modify_qp).
func kernelULP(b *apmtest.Builder) {
	b.PID, b.Comm = 0, "kworker/u8:2"
	armedQP(b)
}

// On kernels before 6.11 the QP events of a kernel ULP's QPs come only from
// the driver hooks. The model ties such a copy to the one QP it knows with
// that number, and when ib_core or ib_uverbs delivers the same event too,
// it counts once.
func TestDriverEvents(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "a kernel ULP on mlx5 with a 6.1 kernel: the driver's PATH_MIG gives missed-rearm",
			story: func(b *apmtest.Builder) {
				kernelULP(b)
				driverCopy(b, qpn, event.EvPathMig)
			},
			want: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "the driver's PATH_MIG, the reading still ARMED: mig-state-mismatch",
			story: func(b *apmtest.Builder) {
				kernelULP(b)
				driverCopy(b, qpn, event.EvPathMig)
				b.After(time.Millisecond).Truth(qpn, event.MigArmed, event.StateRTS)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
			},
			want: []apm.Kind{apm.MigStateMismatch},
		},
		{
			name: "driver and uverbs copies of one PATH_MIG: one episode, resolved by the three steps",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				driverCopy(b, qpn, event.EvPathMig)
				b.After(200 * time.Microsecond).PathMig(qpn)
				b.After(3*time.Second).ThreeSteps(qpn, apmtest.PathC, 0)
			},
			want:     []apm.Kind{apm.MissedRearm},
			resolved: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "the typed copy first, then the driver's (a workqueue delays it): still one",
			cfg:  func(c *apm.Config) { c.FlapCount = 2 },
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(300 * time.Millisecond)
				driverCopy(b, qpn, event.EvPathMig)
			},
		},
		{
			name: "the driver's PATH_MIG_ERR: migration-error",
			story: func(b *apmtest.Builder) {
				kernelULP(b)
				driverCopy(b, qpn, event.EvPathMigErr)
			},
			want: []apm.Kind{apm.MigrationError},
		},
		{
			name: "negative: a driver event for a QPN the model does not know",
			story: func(b *apmtest.Builder) {
				kernelULP(b)
				driverCopy(b, qpn+1, event.EvPathMig)
			},
		},
	})
}

// A driver copy whose QPN two devices share cannot be attributed.
func TestDriverEventAmbiguous(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	b.Device = "mlx5_1"
	armedQP(b)
	driverCopy(b, qpn, event.EvPathMig)
	got, m, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
	if err != nil {
		t.Fatal(err)
	}
	checkKinds(t, got, nil, nil)
	if s := m.Stats(); s.Unattributed != 1 {
		t.Errorf("stats %+v: want the driver copy unattributed", s)
	}
}

// A driver copy (QPN only, no device) is held until its typed twin claims
// it: with identical QPNs on two rails, the typed copy names the device,
// even when the model knew the QPN only on the other one
// (apm/qpevent.go).
func TestDriverEventHeldForTypedTwin(t *testing.T) {
	b := apmtest.New()
	armedQP(b) // mlx5_0's QP
	driverCopy(b, qpn, event.EvPathMig)
	b.Device = "mlx5_1" // a QP the model has not seen, same QPN
	b.After(20 * time.Microsecond).PathMig(qpn)
	got, m, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Kind != apm.MissedRearm || got[0].QP.Device != "mlx5_1" {
		t.Fatalf("findings %v: want one missed-rearm, on mlx5_1", got)
	}
	if s := m.Stats(); s.Duplicates != 1 {
		t.Errorf("stats %+v: want the driver copy counted as the typed one's duplicate", s)
	}
}

// Only QP types with a path-migration state get histories: RC, UC and XRC.
func TestOnlyAPMTypesHaveHistories(t *testing.T) {
	for _, tc := range []struct {
		typ  event.QPType
		want bool
	}{
		{event.QPTypeRC, true}, {event.QPTypeUC, true}, {event.QPTypeXRCIni, true}, {event.QPTypeXRCTgt, true},
		{event.QPTypeUD, false}, {event.QPTypeGSI, false}, {event.QPTypeSMI, false}, {8 /* RAW_PACKET */, false}, {0xff /* DRIVER */, false},
	} {
		b := apmtest.New()
		b.Add(&event.Event{Kind: event.KindQPCreate, QPN: qpn, Life: &event.QPLife{QPType: tc.typ}})
		b.Modify(qpn, event.AttrState|event.AttrPathMigState, func(m *event.Modify) {
			m.QPType, m.State, m.MigState = tc.typ, event.StateRTS, event.MigRearm
		})
		b.Add(&event.Event{Kind: event.KindQPEvent, QPN: qpn, QP: &event.QPEvent{Type: event.EvPathMig, QPType: tc.typ, Origin: event.OriginUser}})
		got, m, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
		if err != nil {
			t.Fatal(err)
		}
		_, tracked := m.Lookup(b.Device, qpn)
		if tracked != tc.want || (len(got) > 0) != tc.want {
			t.Errorf("%v: tracked %v with findings %v, want tracked %v", tc.typ, tracked, got, tc.want)
		}
	}
}

// A CM record that lost its payload (a damaged recording) does not make a
// QP CM-managed.
func TestCMRecordWithoutPayload(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	b.Add(&event.Event{Kind: event.KindCMNotify, QPN: qpn})
	b.Add(&event.Event{Kind: event.KindMAD, QPN: qpn})
	b.PathMig(qpn)
	b.ThreeSteps(qpn, apmtest.PathC, 0)
	got, m, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
	if err != nil {
		t.Fatal(err)
	}
	checkKinds(t, got, nil, nil)
	if v, _ := m.Lookup(b.Device, qpn); v.CM {
		t.Error("a CM record without payload marked the QP CM-managed")
	}
}

// A modify to PATH_MIG_STATE=ARMED is refused by IBTA and rdmavt, but the
// firmware behind mlx4/mlx5 may take it: then the QP is armed like after a
// rearm that completed, and its next PATH_MIG is a migration.
func TestModifyToArmed(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "accepted: it closes the episode, and the next PATH_MIG is a migration of its own",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.LoadAlt(qpn, apmtest.PathC)
				b.Arm(qpn)
				b.After(10 * time.Second).PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathA, 0)
			},
		},
		{
			name: "accepted, then the next migration is not rearmed: missed-rearm",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.LoadAlt(qpn, apmtest.PathC)
				b.Arm(qpn)
				b.After(10 * time.Second).PathMig(qpn)
			},
			want: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "accepted: it closes the episode like a rearm onto the loaded alternate",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.LoadAlt(qpn, apmtest.PathC)
				b.Arm(qpn)
				b.After(10*time.Second).Truth(qpn, event.MigArmed, event.StateRTS)
			},
		},
		{
			name: "negative: refused (rdmavt): the QP stays unarmed and the next PATH_MIG is stray",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.LoadAlt(qpn, apmtest.PathC)
				apmtest.Fail(b.Arm(qpn), 22)
				b.After(10 * time.Second).PathMig(qpn)
			},
			want: []apm.Kind{apm.MissedRearm, apm.APMModifyFailed},
		},
	})
}
