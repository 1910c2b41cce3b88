package apm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

func TestMigrationError(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name:  "PATH_MIG_ERR",
			story: func(b *apmtest.Builder) { armedQP(b); b.PathMigErr(qpn) },
			want:  []apm.Kind{apm.MigrationError},
		},
		{
			name: "repeated PATH_MIG_ERR without a rearm between is one finding",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMigErr(qpn)
				b.After(time.Second).PathMigErr(qpn)
			},
			want: []apm.Kind{apm.MigrationError},
		},
		{
			name: "fails again after a new alternate and rearm: a second finding",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMigErr(qpn)
				b.LoadAltRearm(qpn, apmtest.PathC)
				b.After(time.Second).PathMigErr(qpn)
			},
			want: []apm.Kind{apm.MigrationError, apm.MigrationError},
		},
		{
			name: "negative: a successful migration handled by the three steps",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
			},
		},
	})
}

// IBTA and rdmavt migrate blindly: a dead alternate shows as PATH_MIG, then
// the QP dying on it once the retries there run out (RETRY_EXC_ERR, no
// async event).
func TestMigrationErrorDiedOnAlternate(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "PATH_MIG, the three steps, then the QP reads ERR within the retry window",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(30*time.Second).Truth(qpn, event.MigRearm, event.StateErr)
			},
			want: []apm.Kind{apm.MigrationError},
		},
		{
			name: "negative: PATH_MIG, then a QP error event (a local error, not the alternate)",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(5*time.Second).QPEvent(qpn, event.EvQPFatal)
			},
		},
		{
			name: "both ports down: PATH_MIG, then the owner's teardown",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				portErr(b, apmtest.PathA.Port)
				portErr(b, apmtest.PathB.Port)
				b.After(20 * time.Second).PathMig(qpn)
				b.After(time.Second).ToState(qpn, event.StateErr)
				b.Destroy(qpn)
			},
			want: []apm.Kind{apm.MigrationError},
		},
		{
			name: "armed onto its own primary at connection: PATH_MIG onto the failed path, then the owner's teardown",
			story: func(b *apmtest.Builder) {
				same := apmtest.PathA
				b.Connect(qpn, apmtest.PathA, &same)
				b.After(time.Minute).PathMig(qpn)
				b.After(time.Second).ToState(qpn, event.StateErr)
			},
			want: []apm.Kind{apm.MigrationError},
		},
		{
			name: "a forced migration onto an alternate whose port is down, then ERR",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				portErr(b, apmtest.PathB.Port)
				b.After(time.Second).ForceMigrate(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(10*time.Second).Truth(qpn, event.MigRearm, event.StateErr)
			},
			want: []apm.Kind{apm.MigrationError},
		},
		{
			name: "PATH_MIG_ERR (firmware), then ERR: one finding",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMigErr(qpn)
				b.After(time.Second).Truth(qpn, event.MigArmed, event.StateErr)
			},
			want: []apm.Kind{apm.MigrationError},
		},
		{
			name: "negative: a reading of ARMED after the rearm proves the new path; a later death is another failure",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(time.Second).Truth(qpn, event.MigArmed, event.StateRTS)
				b.After(30*time.Second).Truth(qpn, event.MigArmed, event.StateErr)
			},
		},
		{
			name: "alive before its retries on the alternate ran out (alt_timeout 14: 0.54 s), then ERR",
			story: func(b *apmtest.Builder) {
				alt := apmtest.PathB
				alt.Timeout = 14
				b.Connect(qpn, apmtest.PathA, &alt)
				b.After(time.Second).PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(200*time.Millisecond).Truth(qpn, event.MigRearm, event.StateRTS)
				b.After(time.Second).Truth(qpn, event.MigRearm, event.StateErr)
			},
			want: []apm.Kind{apm.MigrationError},
		},
		{
			name: "negative: read alive after its retries on the alternate ran out (alt_timeout 14): a later death is another failure",
			story: func(b *apmtest.Builder) {
				alt := apmtest.PathB
				alt.Timeout = 14
				b.Connect(qpn, apmtest.PathA, &alt)
				b.After(time.Second).PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(time.Second).Truth(qpn, event.MigRearm, event.StateRTS)
				b.After(2*time.Second).Truth(qpn, event.MigRearm, event.StateErr)
			},
		},
		{
			name: "negative: the QP outlives the retry window",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(3*time.Minute).Truth(qpn, event.MigArmed, event.StateErr)
			},
		},
		{
			name: "negative: the new primary's port fails after the migration: a new failure",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn) // onto B, port 2
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(10 * time.Second)
				portErr(b, apmtest.PathB.Port)
				b.After(time.Second).Truth(qpn, event.MigRearm, event.StateErr)
			},
		},
		{
			name: "negative: the owner tears the QP down after a migration with no sign of a bad alternate",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(time.Second).ToState(qpn, event.StateErr)
				b.Destroy(qpn)
			},
		},
		{
			name: "negative: the alternate's port came back (PORT_ACTIVE) before the migration",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				portErr(b, apmtest.PathB.Port)
				b.After(time.Second)
				portActive(b, apmtest.PathB.Port)
				b.After(time.Second).PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(time.Second).ToState(qpn, event.StateErr)
			},
		},
	})
}

// The explanation says which way the migration failed and names the
// alternate's fault.
func TestMigrationErrorExplains(t *testing.T) {
	for _, tc := range []struct {
		name  string
		story func(b *apmtest.Builder)
		say   []string
	}{
		{"PATH_MIG_ERR", func(b *apmtest.Builder) { armedQP(b); b.PathMigErr(qpn) }, []string{"PATH_MIG_ERR"}},
		{"died, port down", func(b *apmtest.Builder) {
			armedQP(b)
			portErr(b, apmtest.PathB.Port)
			b.After(time.Second).PathMig(qpn)
			b.After(time.Second).ToState(qpn, event.StateErr)
		}, []string{"migrated (PATH_MIG)", "died", "loaded before a PORT_ERR on its port"}},
		{"died, same path", func(b *apmtest.Builder) {
			same := apmtest.PathA
			b.Connect(qpn, apmtest.PathA, &same)
			b.After(time.Minute).PathMig(qpn)
			b.After(time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
		}, []string{"migrated (PATH_MIG)", "the path that had just failed"}},
		{"died, unchecked", func(b *apmtest.Builder) {
			armedQP(b)
			b.PathMig(qpn)
			b.After(time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
		}, []string{"migrated (PATH_MIG)", "unchecked"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := apmtest.New()
			tc.story(b)
			got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
			if err != nil {
				t.Fatal(err)
			}
			f := findOne(t, got, apm.MigrationError, false)
			for _, s := range tc.say {
				if !strings.Contains(f.Explanation, s) {
					t.Errorf("explanation %q does not say %q", f.Explanation, s)
				}
			}
		})
	}
}

// A QP reset and connected again is a new connection: a migration before
// the reset judges nothing after it.
func TestMigrationErrorForgottenAtReset(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "negative: PATH_MIG, reset, connected again, then ERR within the window",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(time.Second).ToState(qpn, event.StateReset)
				b.ToState(qpn, event.StateInit)
				b.ToState(qpn, event.StateRTR)
				b.ToState(qpn, event.StateRTS)
				b.After(10*time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
			},
		},
	})
}

// A rearm without a new alternate arms the QP onto the path it runs on (a
// migration copies the alternate into the primary). When that path fails,
// whatever the HCA reports (PATH_MIG onto the same path, or a firmware's
// PATH_MIG_ERR), the loss is the rearm's unprotected-failure, never a
// migration-error (docs/findings.md, migration-error, "Never").
func TestMigrationErrorAfterBareRearm(t *testing.T) {
	bare := func(b *apmtest.Builder) {
		armedQP(b)
		b.PathMig(qpn)                             // A -> B; the alternate stays B
		b.After(100 * time.Millisecond).Rearm(qpn) // armed onto B itself
		b.After(5 * time.Minute)
	}
	runScenarios(t, []scenario{
		{
			name: "a firmware's PATH_MIG_ERR when the path fails, then the QP reads ERR",
			story: func(b *apmtest.Builder) {
				bare(b)
				b.PathMigErr(qpn)
				b.After(3*time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
			},
			want: []apm.Kind{apm.RearmWithoutAlt, apm.UnprotectedFailure},
		},
		{
			name: "PORT_ERR on its port, PATH_MIG_ERR, then the owner's teardown",
			story: func(b *apmtest.Builder) {
				bare(b)
				portErr(b, apmtest.PathB.Port)
				b.After(time.Second).PathMigErr(qpn)
				b.After(time.Second).ToState(qpn, event.StateErr)
				b.Destroy(qpn)
			},
			want: []apm.Kind{apm.RearmWithoutAlt, apm.UnprotectedFailure},
		},
		{
			name: "its paths never seen loaded: PATH_MIG when the path fails, then the QP reads ERR",
			story: func(b *apmtest.Builder) {
				b.Truth(qpn, event.MigArmed, event.StateRTS) // first seen mid-stream
				b.After(time.Second).PathMig(qpn)
				b.After(100 * time.Millisecond).Rearm(qpn)
				b.After(5 * time.Minute).PathMig(qpn)
				b.After(time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
			},
			want: []apm.Kind{apm.RearmWithoutAlt, apm.UnprotectedFailure},
		},
		{
			name: "control: rearmed onto a new alternate, then PATH_MIG_ERR: the alternate is bad",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(5 * time.Minute).PathMigErr(qpn)
				b.After(3*time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
			},
			want: []apm.Kind{apm.MigrationError},
		},
	})
}
