package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

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

// The stuck-rearm clock restarts at every migration and rearm, and a QP in
// ERR or RESET is never stuck.
func TestStuckRearmClock(t *testing.T) {
	poll := func(b *apmtest.Builder, mig event.MigState, st event.QPState, n int) {
		for range n {
			b.After(time.Second).Truth(qpn, mig, st)
		}
	}
	runScenarios(t, []scenario{
		{
			name: "negative: REARM for 8 s, a migration, REARM for 8 s after the new rearm",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				poll(b, event.MigRearm, event.StateRTS, 8)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				poll(b, event.MigRearm, event.StateRTS, 8)
			},
		},
		{
			name: "REARM for 12 s after the last rearm",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				poll(b, event.MigRearm, event.StateRTS, 4)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				poll(b, event.MigRearm, event.StateRTS, 12)
			},
			want: []apm.Kind{apm.StuckRearm},
		},
		{
			name: "stuck, then a migration proves it was ARMED: resolved",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				poll(b, event.MigRearm, event.StateRTS, 12)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
			},
			want:     []apm.Kind{apm.StuckRearm},
			resolved: []apm.Kind{apm.StuckRearm},
		},
		{
			name: "negative: the QP sits in ERR reading REARM",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.ToState(qpn, event.StateErr)
				poll(b, event.MigRearm, event.StateErr, 15)
			},
		},
	})
}

// An idle connection that rearmed correctly reads REARM until its first
// packet: stuck-rearm is a warning only when traffic is known to flow (the
// HCA migrated the QP), else information.
func TestStuckRearmSeverity(t *testing.T) {
	rearmFor := func(b *apmtest.Builder) {
		for range 12 {
			b.After(time.Second).Truth(qpn, event.MigRearm, event.StateRTS)
		}
	}
	for _, tc := range []struct {
		name  string
		story func(b *apmtest.Builder)
		want  apm.Severity
	}{
		{"idle after connecting: information", func(b *apmtest.Builder) { armedQP(b); rearmFor(b) }, apm.SevInfo},
		{"after the HCA migrated it and the three steps: a warning", func(b *apmtest.Builder) {
			armedQP(b)
			b.After(time.Second).PathMig(qpn)
			b.ThreeSteps(qpn, apmtest.PathC, 0)
			rearmFor(b)
		}, apm.SevWarning},
		{"after a software-forced migration (no traffic shown): information", func(b *apmtest.Builder) {
			armedQP(b)
			b.After(time.Second).ForceMigrate(qpn)
			b.ThreeSteps(qpn, apmtest.PathC, 0)
			rearmFor(b)
		}, apm.SevInfo},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := apmtest.New()
			tc.story(b)
			got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
			if err != nil {
				t.Fatal(err)
			}
			f := findOne(t, got, apm.StuckRearm, false)
			if f.Severity != tc.want {
				t.Fatalf("severity %s, want %s: %s", f.Severity, tc.want, f.Explanation)
			}
		})
	}
}
