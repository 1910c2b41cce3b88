package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// After a migration the QP runs on its old alternate and has no alternate
// left. Unless software rearms (after loading a new alternate), the next
// failure of the path breaks the connection: missed-rearm.
func TestMissedRearm(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "PATH_MIG and nothing after it",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
			},
			want: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "software forced the migration (PATH_MIG_STATE=MIGRATED) and never rearmed",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.ForceMigrate(qpn)
			},
			want: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "new alternate loaded (step 2) but never rearmed (step 3)",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(100*time.Millisecond).LoadAlt(qpn, apmtest.PathC)
			},
			want: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "forced MIGRATED then its PATH_MIG (as the lab's injector does) is one migration",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.ForceMigrate(qpn)
				b.PathMig(qpn)
				b.After(10 * time.Second)
				b.ForceMigrate(qpn) // nothing armed: not a migration
				b.PathMig(qpn)      // nor is its event: only an ARMED QP migrates
			},
			want: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "a refused rearm is not a rearm",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(100*time.Millisecond).LoadAlt(qpn, apmtest.PathC)
				apmtest.Fail(b.Rearm(qpn), 22)
			},
			want: []apm.Kind{apm.MissedRearm, apm.APMModifyFailed},
		},
		{
			name: "the rearm comes late: found, then resolved",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(3 * time.Second)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
			},
			want:     []apm.Kind{apm.MissedRearm},
			resolved: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "negative: the three steps in time",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(50 * time.Millisecond)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
			},
		},
		{
			name: "negative: MVAPICH2's single modify ALT_PATH|PATH_MIG_STATE=REARM",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(50*time.Millisecond).LoadAltRearm(qpn, apmtest.PathC)
			},
		},
		{
			name: "negative: rearm exactly at the deadline is within it",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				mig := b.PathMig(qpn)
				b.LoadAlt(qpn, apmtest.PathC)
				b.After(time.Duration(mig.Boot + uint64(2*time.Second) - b.Now()))
				b.Rearm(qpn)
			},
		},
		{
			name: "negative: the QP is torn down (ERR) before the deadline",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(time.Second).ToState(qpn, event.StateErr)
			},
		},
		{
			name: "negative: the QP is destroyed before the deadline",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(time.Second).Destroy(qpn)
			},
		},
		{
			name: "negative: forcing MIGRATED on a QP that was never armed is no migration",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				b.ForceMigrate(qpn)
			},
		},
	})
}

// The resolution of a missed-rearm says how long the QP ran unprotected:
// from the migration to the rearm.
func TestMissedRearmResolutionCarriesUnprotectedTime(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	mig := b.PathMig(qpn)
	b.After(7 * time.Second)
	rearm := b.LoadAltRearm(qpn, apmtest.PathC)
	got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
	if err != nil {
		t.Fatal(err)
	}
	f := findOne(t, got, apm.MissedRearm, false)
	r := findOne(t, got, apm.MissedRearm, true)
	if r.Resolves != f.ID {
		t.Errorf("resolution resolves %d, want %d", r.Resolves, f.ID)
	}
	if want := time.Duration(rearm.Boot - mig.Boot); r.Unprotected != want {
		t.Errorf("unprotected %v, want %v", r.Unprotected, want)
	}
	if f.Evidence[0].Seq != mig.Seq || f.Last != mig.Boot+uint64(2*time.Second) {
		t.Errorf("finding evidence %+v last %d: want the PATH_MIG and the deadline", f.Evidence, f.Last)
	}
	if f.PID != b.PID || f.Comm != b.Comm {
		t.Errorf("owner %d/%q, want %d/%q", f.PID, f.Comm, b.PID, b.Comm)
	}
	if f.FirstTime.IsZero() {
		t.Error("no wall time on the finding")
	}
}

// The deadline is a flag: a shorter one catches a slower rearm.
func TestMissedRearmDeadlineIsConfigurable(t *testing.T) {
	for _, tc := range []struct {
		deadline time.Duration
		want     int
	}{{2 * time.Second, 0}, {500 * time.Millisecond, 1}} {
		b := apmtest.New()
		armedQP(b)
		b.PathMig(qpn)
		b.After(time.Second).LoadAltRearm(qpn, apmtest.PathC)
		cfg := apm.DefaultConfig()
		cfg.RearmDeadline = tc.deadline
		got, _, err := apmtest.Run(cfg, b.Steps, settle)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range got {
			if f.Kind == apm.MissedRearm && !f.Resolved {
				n++
			}
		}
		if n != tc.want {
			t.Errorf("deadline %v: %d missed-rearm, want %d", tc.deadline, n, tc.want)
		}
	}
}

// Only an ARMED QP can migrate (IBTA): a PATH_MIG on a QP with no rearm
// since its last migration is evidence, never a new episode.
func TestMissedRearmOnlyArmedMigrates(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "a second PATH_MIG with no rearm between: one missed-rearm, not two",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(5 * time.Second).PathMig(qpn)
			},
			want: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "the three steps after a stray PATH_MIG resolve the first missed-rearm",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(5 * time.Second).PathMig(qpn)
				b.After(time.Second).ThreeSteps(qpn, apmtest.PathC, 0)
			},
			want:     []apm.Kind{apm.MissedRearm},
			resolved: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "negative: stray PATH_MIGs do not count towards flapping",
			cfg:  func(c *apm.Config) { c.FlapCount = 2 },
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
			},
		},
		{
			name: "negative: forced migration, the application's rearm, then the forced migration's PATH_MIG",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.ForceMigrate(qpn)
				b.After(time.Millisecond).ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(time.Millisecond).PathMig(qpn)
			},
		},
		{
			name: "negative: a QP created and never armed cannot migrate",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				b.PathMig(qpn)
			},
		},
		{
			name: "a QP first seen at its PATH_MIG (the tool started later) gets the benefit of the doubt",
			story: func(b *apmtest.Builder) {
				b.PathMig(qpn)
			},
			want: []apm.Kind{apm.MissedRearm},
		},
	})
}

// A QP drained to SQD (or in SQE) keeps its pending deadline: it is judged
// when the QP is back in RTS. Only destroy, ERR and RESET end an episode.
func TestMissedRearmAcrossSQD(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "in SQD at the deadline, back in RTS later without a rearm",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(time.Second).ToState(qpn, event.StateSQD)
				b.After(5*time.Second).ToState(qpn, event.StateRTS)
			},
			want: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "negative: in SQD, rearmed on the way back to RTS (SQD->RTS with PATH_MIG_STATE)",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.LoadAlt(qpn, apmtest.PathC)
				b.After(time.Second).ToState(qpn, event.StateSQD)
				b.After(5*time.Second).Modify(qpn, event.AttrState|event.AttrPathMigState, func(m *event.Modify) {
					m.State, m.MigState = event.StateRTS, event.MigRearm
				})
			},
		},
		{
			name: "negative: to ERR while in SQD",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(time.Second).ToState(qpn, event.StateSQD)
				b.After(5*time.Second).ToState(qpn, event.StateErr)
			},
		},
	})
}
