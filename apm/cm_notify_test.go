package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

func TestCMNotNotified(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "CM-managed QP migrates, the three steps are done, the CM is never told",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
			},
			want: []apm.Kind{apm.CMNotNotified},
		},
		{
			name: "the CM evidence comes after the migration (the LAP it sends)",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.Notify(qpn, event.EvCommEst, -106, cmID)
				b.After(time.Minute).PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, cmID)
			},
			want: []apm.Kind{apm.CMNotNotified},
		},
		{
			name: "negative: ib_cm_notify(PATH_MIG) succeeded",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.PathMig(qpn)
				b.Notify(qpn, event.EvPathMig, 0, cmID)
				b.ThreeSteps(qpn, apmtest.PathC, cmID)
			},
		},
		{
			name: "negative: a plain verbs QP (no CM) has no CM to notify",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
			},
		},
	})
}

func TestCMNotNotifiedFromReading(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	b.Truth(qpn, event.MigArmed, event.StateRTS).Truth.CM = true
	b.PathMig(qpn)
	b.ThreeSteps(qpn, apmtest.PathC, 0)
	got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	checkKinds(t, got, []apm.Kind{apm.CMNotNotified}, nil)
}
