package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// portErr is the port event of a link going down on the device's port.
func portErr(b *apmtest.Builder, port uint32) {
	b.Add(&event.Event{Kind: event.KindPortEvent, Port: &event.PortEvent{Type: event.EvPortErr, Port: port}})
}

// A QP running without a valid armed alternate that then loses its
// connection: the failure APM exists to survive.
func TestUnprotectedFailure(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "missed rearm, then the new primary fails: the QP reads ERR",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn) // now on B
				b.After(10*time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
			},
			want: []apm.Kind{apm.MissedRearm, apm.UnprotectedFailure},
		},
		{
			name: "missed rearm, PORT_ERR on its primary port, the owner moves the QP to ERR",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn) // now on B, port 2
				b.After(10 * time.Second)
				portErr(b, apmtest.PathB.Port)
				b.After(5*time.Millisecond).ToState(qpn, event.StateErr)
			},
			want: []apm.Kind{apm.MissedRearm, apm.UnprotectedFailure},
		},
		{
			name: "a stuck rearm, then a fatal QP event",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				for range 12 {
					b.After(time.Second).Truth(qpn, event.MigRearm, event.StateRTS)
				}
				b.QPEvent(qpn, event.EvQPFatal)
			},
			want: []apm.Kind{apm.StuckRearm, apm.UnprotectedFailure},
		},
		{
			name: "rearmed without a new alternate, then the QP reads ERR; once per generation",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.Rearm(qpn)
				b.After(10*time.Second).Truth(qpn, event.MigArmed, event.StateErr)
				b.QPEvent(qpn, event.EvQPFatal)
			},
			want: []apm.Kind{apm.RearmWithoutAlt, apm.UnprotectedFailure},
		},
		{
			name: "negative: the owner tears the unprotected QP down with no port failure",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(10*time.Second).ToState(qpn, event.StateErr)
				b.Destroy(qpn)
			},
			want: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "negative: a PORT_ERR on the other port",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn) // now on port 2
				b.After(10 * time.Second)
				portErr(b, apmtest.PathA.Port)
				b.ToState(qpn, event.StateErr)
			},
			want: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "negative: rearmed late onto a new alternate, then an error",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(3*time.Second).ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(10*time.Second).Truth(qpn, event.MigArmed, event.StateErr)
			},
			want:     []apm.Kind{apm.MissedRearm},
			resolved: []apm.Kind{apm.MissedRearm},
		},
		{
			name: "negative: both paths fail on an armed QP: migration-error only",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMigErr(qpn)
				b.After(time.Second).Truth(qpn, event.MigArmed, event.StateErr)
			},
			want: []apm.Kind{apm.MigrationError},
		},
		{
			name: "negative: a QP that never used APM fails",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				b.After(10*time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
			},
		},
	})
}

// The finding names its cause and the time without protection.
func TestUnprotectedFailureNamesItsCause(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	mig := b.PathMig(qpn)
	b.After(10*time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
	got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	missed := findOne(t, got, apm.MissedRearm, false)
	f := findOne(t, got, apm.UnprotectedFailure, false)
	if f.Cause != missed.ID || f.Severity != apm.SevCritical || f.First != mig.Boot || f.Unprotected < 10*time.Second {
		t.Errorf("unprotected-failure %+v: want cause %d, critical, from the migration, >= 10 s unprotected", f, missed.ID)
	}
}
