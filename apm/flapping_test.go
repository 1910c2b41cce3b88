package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

func TestFlapping(t *testing.T) {
	// Each migration moves the QP to its alternate; the new alternate is
	// always another route than the one it now runs on.
	var primary, alt event.Path
	migrateEvery := func(b *apmtest.Builder, n int, gap time.Duration) {
		for range n {
			b.After(gap).PathMig(qpn)
			primary = alt
			for _, p := range []event.Path{apmtest.PathA, apmtest.PathB, apmtest.PathC} {
				if !p.SameRoute(primary) {
					alt = p
					break
				}
			}
			b.ThreeSteps(qpn, alt, 0)
		}
	}
	armedQP := func(b *apmtest.Builder) {
		armedQP(b)
		primary, alt = apmtest.PathA, apmtest.PathB
	}
	runScenarios(t, []scenario{
		{
			name:  "3 migrations in 30 s",
			story: func(b *apmtest.Builder) { armedQP(b); migrateEvery(b, 3, 10*time.Second) },
			want:  []apm.Kind{apm.Flapping},
		},
		{
			name:  "8 migrations in quick succession: one finding for the burst",
			story: func(b *apmtest.Builder) { armedQP(b); migrateEvery(b, 8, time.Second) },
			want:  []apm.Kind{apm.Flapping},
		},
		{
			name: "two bursts separated by a quiet window: two findings",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				migrateEvery(b, 3, time.Second)
				b.After(6 * time.Minute) // longer than FlapWindow
				migrateEvery(b, 3, time.Second)
			},
			want: []apm.Kind{apm.Flapping, apm.Flapping},
		},
		{
			name: "negative: two forced migrations, each followed by its PATH_MIG, are two",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				for _, p := range []event.Path{apmtest.PathC, apmtest.PathA} {
					b.After(time.Second).ForceMigrate(qpn)
					b.PathMig(qpn)
					b.ThreeSteps(qpn, p, 0)
				}
			},
		},
		{
			name:  "negative: 3 migrations over 12 minutes (FlapWindow is 5)",
			story: func(b *apmtest.Builder) { armedQP(b); migrateEvery(b, 3, 6*time.Minute) },
		},
		{
			name:  "negative: count raised to 4",
			cfg:   func(c *apm.Config) { c.FlapCount = 4 },
			story: func(b *apmtest.Builder) { armedQP(b); migrateEvery(b, 3, time.Second) },
		},
	})
}
