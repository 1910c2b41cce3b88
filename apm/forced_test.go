package apm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// forceInside is rdmavt's order: the PATH_MIG raised inside the modify call
// is stamped before the modify, which is stamped at the call's exit.
func forceInside(b *apmtest.Builder) {
	b.PathMig(qpn)
	b.After(20 * time.Microsecond).ForceMigrate(qpn)
}

// forceAfter is a firmware that raises the PATH_MIG after the call returned.
func forceAfter(b *apmtest.Builder) {
	b.ForceMigrate(qpn)
	b.After(3 * time.Millisecond).PathMig(qpn)
}

// A migration software forces is one forced migration whatever the order
// of its PATH_MIG (before the modify's exit, after it, or none): one
// episode, and never flapping.
func TestForcedMigration(t *testing.T) {
	threeTimes := func(force func(*apmtest.Builder)) func(*apmtest.Builder) {
		return func(b *apmtest.Builder) {
			armedQP(b)
			for _, p := range []event.Path{apmtest.PathC, apmtest.PathA, apmtest.PathB} {
				b.After(5 * time.Second)
				force(b)
				b.ThreeSteps(qpn, p, 0)
			}
		}
	}
	runScenarios(t, []scenario{
		{
			name:  "negative: three forced migrations, PATH_MIG inside the call (rdmavt), are no flapping",
			story: threeTimes(forceInside),
		},
		{
			name:  "negative: three forced migrations, PATH_MIG after the call, are no flapping",
			story: threeTimes(forceAfter),
		},
		{
			name:  "negative: three forced migrations without PATH_MIG are no flapping",
			story: threeTimes(func(b *apmtest.Builder) { b.ForceMigrate(qpn) }),
		},
		{
			name: "three hardware migrations in the same time are flapping",
			story: threeTimes(func(b *apmtest.Builder) {
				b.PathMig(qpn)
			}),
			want: []apm.Kind{apm.Flapping},
		},
		{
			name: "PATH_MIG inside the call and no rearm: one missed-rearm",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				forceInside(b)
			},
			want: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "a modify to MIGRATED 1 s after a hardware migration is a no-op: that migration still counts",
			cfg:  func(c *apm.Config) { c.FlapCount = 2 },
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(time.Second).ForceMigrate(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(time.Second).PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathA, 0)
			},
			want: []apm.Kind{apm.Flapping},
		},
	})
}

// The missed-rearm of a forced migration whose PATH_MIG came first (inside
// the call) names the forced migration, with the PATH_MIG as its event.
func TestForcedMigrationInsideNamesIt(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	forceInside(b)
	got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
	if err != nil {
		t.Fatal(err)
	}
	f := findOne(t, got, apm.MissedRearm, false)
	if len(f.Evidence) != 2 || !strings.Contains(f.Evidence[0].What, "forced") || f.Evidence[1].What != "PATH_MIG" {
		t.Errorf("evidence %+v: want the forced migration, then its PATH_MIG", f.Evidence)
	}
}
