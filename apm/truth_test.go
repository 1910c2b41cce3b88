package apm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// The seed's symptom: "I do receive IB_MIG_MIGRATED event, but the QP's
// mig_state is not actually changed to MIGRATED". The model compares what
// the events say with ground truth (rdma netlink's path-mig-state, or a
// query) and explains the difference from the QP's history.
func TestMigStateMismatch(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "PATH_MIG arrived but the QP still reads ARMED (the seed's symptom)",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.Truth(qpn, event.MigArmed, event.StateRTS)
				b.PathMig(qpn)
				b.After(5*time.Millisecond).Truth(qpn, event.MigArmed, event.StateRTS)
				b.SeedSteps(qpn, apmtest.PathC, 0)
			},
			want: []apm.Kind{apm.MigStateMismatch},
		},
		{
			name: "a rearmed QP reads MIGRATED and no PATH_MIG comes: an unseen migration",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.After(time.Second).Truth(qpn, event.MigArmed, event.StateRTS)
				b.After(time.Second).Truth(qpn, event.MigMigrated, event.StateRTS)
			},
			want: []apm.Kind{apm.MigStateMismatch},
		},
		{
			name: "negative: PATH_MIG, the QP reads MIGRATED, then the three steps",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.Truth(qpn, event.MigMigrated, event.StateRTS)
				b.SeedSteps(qpn, apmtest.PathC, 0)
				b.After(time.Second).Truth(qpn, event.MigArmed, event.StateRTS)
			},
		},
		{
			name: "negative: the MIGRATED reading comes before its PATH_MIG (event still in flight)",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.After(time.Second).Truth(qpn, event.MigMigrated, event.StateRTS)
				b.After(300 * time.Millisecond).PathMig(qpn)
				b.SeedSteps(qpn, apmtest.PathC, 0)
			},
		},
		{
			name: "negative: a rearmed QP reads REARM, then ARMED once the peer's packet came",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.Truth(qpn, event.MigRearm, event.StateRTS)
				b.After(time.Second).Truth(qpn, event.MigArmed, event.StateRTS)
			},
		},
	})
}

// The explanation follows the seed's diagnosis: "Possibly, the problematic
// transition is the second one, which occurs after specifying a new
// alternate path and rearming APM?"
func TestMigStateMismatchExplainsSecondMigration(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	b.PathMig(qpn)
	b.Rearm(qpn) // steps 1-2 skipped
	b.After(20 * time.Second).PathMig(qpn)
	b.After(time.Millisecond).Truth(qpn, event.MigRearm, event.StateRTS)
	got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := findOne(t, got, apm.MigStateMismatch, false)
	if !strings.Contains(f.Explanation, "second transition") {
		t.Errorf("explanation %q does not name the second transition", f.Explanation)
	}
	if len(f.Evidence) != 2 || f.Evidence[1].Seq != 0 || f.Evidence[1].What != "netlink reads REARM" {
		t.Errorf("evidence %+v: want the PATH_MIG and the reading", f.Evidence)
	}
}

// REARM turns ARMED only when a packet with MigReq=0 arrives from the peer:
// a QP that keeps reading REARM has a peer that never rearmed, or no
// traffic.
func TestStuckRearm(t *testing.T) {
	poll := func(b *apmtest.Builder, mig event.MigState, n int) {
		for range n {
			b.After(time.Second).Truth(qpn, mig, event.StateRTS)
		}
	}
	runScenarios(t, []scenario{
		{
			name: "reads REARM for 12 s after the rearm",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				poll(b, event.MigRearm, 12)
			},
			want: []apm.Kind{apm.StuckRearm},
		},
		{
			name: "stuck, then the peer rearms and traffic flows: resolved",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				poll(b, event.MigRearm, 12)
				poll(b, event.MigArmed, 2)
			},
			want:     []apm.Kind{apm.StuckRearm},
			resolved: []apm.Kind{apm.StuckRearm},
		},
		{
			name: "a QP the tool never saw, read from netlink only",
			story: func(b *apmtest.Builder) {
				poll(b, event.MigRearm, 15)
			},
			want: []apm.Kind{apm.StuckRearm},
		},
		{
			name: "negative: REARM for 3 s, then ARMED",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				poll(b, event.MigRearm, 3)
				poll(b, event.MigArmed, 20)
			},
		},
		{
			name:  "negative: threshold raised to 30 s",
			cfg:   func(c *apm.Config) { c.StuckRearm = 30 * time.Second },
			story: func(b *apmtest.Builder) { armedQP(b); poll(b, event.MigRearm, 12) },
		},
	})
}

// A ground-truth source puts its readings in the event stream
// (event.KindTruth): a reading names the owner when no event did and marks
// a QP with a cm_id CM-managed; a QP gone from the table is forgotten; a UD
// QP's reading is not APM's business.
func TestTruthEvents(t *testing.T) {
	var got []apm.Finding
	m, err := apm.New(apm.DefaultConfig(), func(f apm.Finding) { got = append(got, f) })
	if err != nil {
		t.Fatal(err)
	}
	read := func(sec uint64, qpn uint32, typ event.QPType, cm bool) {
		m.Handle(&event.Event{Kind: event.KindTruth, Boot: sec * uint64(time.Second), Device: "mlx5_0", QPN: qpn,
			PID: 4242, Comm: "ib_write_bw", Truth: &event.Truth{Op: event.TruthRead, Source: "netlink", QPType: typ,
				State: event.StateRTS, HasState: true, Mig: event.MigRearm, CM: cm}})
	}
	for s := range uint64(12) {
		read(s+1, 100, event.QPTypeRC, true)
		read(s+1, 101, event.QPTypeUD, false)
	}
	m.Finish(12 * uint64(time.Second))
	if v, ok := m.Lookup("mlx5_0", 100); !ok || !v.CM || v.PID != 4242 || v.Comm != "ib_write_bw" || v.Mig != event.MigRearm {
		t.Fatalf("QP 100 %+v %v: want CM-managed, owned by ib_write_bw:4242, REARM", v, ok)
	}
	if _, ok := m.Lookup("mlx5_0", 101); ok {
		t.Error("a UD QP's reading made a history")
	}
	if len(got) != 1 || got[0].Kind != apm.StuckRearm || got[0].PID != 4242 || got[0].Comm != "ib_write_bw" {
		t.Fatalf("findings %v: want one stuck-rearm naming the owner from the reading", got)
	}
	m.Handle(&event.Event{Kind: event.KindTruth, Boot: 13 * uint64(time.Second), Device: "mlx5_0", QPN: 100,
		Truth: &event.Truth{Op: event.TruthGone, Source: "netlink"}})
	m.Finish(13 * uint64(time.Second))
	if _, ok := m.Lookup("mlx5_0", 100); ok || m.Stats().QPs != 0 {
		t.Errorf("QP 100 still tracked after it vanished from the table (%d QPs)", m.Stats().QPs)
	}
	if s := m.Stats(); s.Truths != 12 || s.Events != 25 {
		t.Errorf("stats %+v: want 12 readings applied of 25 inputs", s)
	}
}
