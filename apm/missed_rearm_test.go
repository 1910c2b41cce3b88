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
				b.SeedSteps(qpn, apmtest.PathC, 0)
			},
			want:     []apm.Kind{apm.MissedRearm},
			resolved: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "negative: the seed's three steps in time",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(50 * time.Millisecond)
				b.SeedSteps(qpn, apmtest.PathC, 0)
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
