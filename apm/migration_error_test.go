package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
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
