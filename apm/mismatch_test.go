package apm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

func TestMigStateMismatch(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "PATH_MIG arrived but the QP still reads ARMED",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.Truth(qpn, event.MigArmed, event.StateRTS)
				b.PathMig(qpn)
				b.After(5*time.Millisecond).Truth(qpn, event.MigArmed, event.StateRTS)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
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
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(time.Second).Truth(qpn, event.MigArmed, event.StateRTS)
			},
		},
		{
			name: "negative: the MIGRATED reading comes before its PATH_MIG (event still in flight)",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.After(time.Second).Truth(qpn, event.MigMigrated, event.StateRTS)
				b.After(300 * time.Millisecond).PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
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

// lateRearmStory: the rearm that a REARM reading shows is delivered after
// the clock moved past the reorder window (a busy host's ring buffer).
func lateRearmStory(b *apmtest.Builder) {
	armedQP(b)
	b.PathMig(qpn)
	b.After(time.Millisecond).LoadAlt(qpn, apmtest.PathC)
	i := len(b.Steps)
	b.Rearm(qpn)
	b.After(10*time.Millisecond).Truth(qpn, event.MigRearm, event.StateRTS)
	pass(b, 200*time.Millisecond)
	b.Steps = late(b.Steps, i)
}

// spanned makes a reading stand for a dump that ran for span before its
// stamp: the row may reflect any instant in between.
func spanned(ev *event.Event, span time.Duration) { ev.Truth.Span = uint64(span) }

// A dump takes time (one QUERY_QP per row): a reading is judged only
// against what surely came before its start, so a correct application gets
// no mig-state-mismatch however the dump and its modifies interleave.
func TestMigStateMismatchDumpSpan(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "negative: the rearm lands while the dump runs and the row shows it",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(time.Millisecond).ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(20 * time.Millisecond)
				spanned(b.Truth(qpn, event.MigRearm, event.StateRTS), 30*time.Millisecond)
			},
		},
		{
			name: "negative: the migration lands while the dump runs and the row predates it",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.After(time.Second).PathMig(qpn)
				b.After(time.Millisecond).ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(5 * time.Millisecond)
				spanned(b.Truth(qpn, event.MigArmed, event.StateRTS), 20*time.Millisecond)
			},
		},
		{
			name: "negative: a rearm, then a dump whose row predates the rearm reads MIGRATED",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				b.LoadAlt(qpn, apmtest.PathB)
				b.After(time.Second).Rearm(qpn)
				b.After(10 * time.Millisecond)
				spanned(b.Truth(qpn, event.MigMigrated, event.StateRTS), 50*time.Millisecond)
				b.After(time.Second).Truth(qpn, event.MigArmed, event.StateRTS)
			},
		},
		{
			name:  "negative: the rearm the reading shows arrives late (a busy ring buffer), within the grace",
			story: lateRearmStory,
		},
		{
			name:  "the same without a grace: the late rearm cannot save the reading",
			cfg:   func(c *apm.Config) { c.TruthGrace = 0 },
			story: lateRearmStory,
			want:  []apm.Kind{apm.MigStateMismatch},
		},
		{
			name: "the dump started after the migration and still reads ARMED",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(50 * time.Millisecond)
				spanned(b.Truth(qpn, event.MigArmed, event.StateRTS), 20*time.Millisecond)
			},
			want: []apm.Kind{apm.MigStateMismatch, apm.MissedRearm},
		},
	})
}

// Each explanation of a QP not MIGRATED after a migration is reachable,
// most specific history first.
func TestMigStateMismatchExplanations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		story func(b *apmtest.Builder)
		want  string
	}{
		{"PATH_MIG without migration", func(b *apmtest.Builder) {
			armedQP(b)
			b.PathMig(qpn)
			b.Truth(qpn, event.MigArmed, event.StateRTS)
		}, "PATH_MIG without migration (the HCA raised the event but the QP never migrated)"},
		{"an unseen rearm", func(b *apmtest.Builder) {
			armedQP(b)
			b.PathMig(qpn)
			b.Truth(qpn, event.MigRearm, event.StateRTS)
		}, "a rearm the tool did not see"},
		{"a stray PATH_MIG", func(b *apmtest.Builder) {
			armedQP(b)
			b.PathMig(qpn)
			b.After(time.Second).PathMig(qpn)
			b.Truth(qpn, event.MigArmed, event.StateRTS)
		}, "only an ARMED QP can migrate"},
		{"the second transition", func(b *apmtest.Builder) {
			armedQP(b)
			b.PathMig(qpn)
			b.Rearm(qpn)
			b.After(20 * time.Second).PathMig(qpn)
			b.Truth(qpn, event.MigArmed, event.StateRTS)
		}, "second transition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := apmtest.New()
			tc.story(b)
			got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if f := findOne(t, got, apm.MigStateMismatch, false); !strings.Contains(f.Explanation, tc.want) {
				t.Errorf("explanation %q, want %q", f.Explanation, tc.want)
			}
		})
	}
}
