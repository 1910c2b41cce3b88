package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

func TestNeverArmed(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "alternate loaded in RTS, never rearmed",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				b.LoadAlt(qpn, apmtest.PathB)
			},
			want: []apm.Kind{apm.NeverArmed},
		},
		{
			name: "alternate loaded at INIT->RTR, RTR->RTS without PATH_MIG_STATE",
			story: func(b *apmtest.Builder) {
				b.Create(qpn)
				b.ToState(qpn, event.StateInit)
				b.Modify(qpn, event.AttrState|event.AttrAV|event.AttrAltPath, func(m *event.Modify) {
					m.State, m.Primary, m.Alt = event.StateRTR, &apmtest.PathA, &apmtest.PathB
				})
				b.ToState(qpn, event.StateRTS)
			},
			want: []apm.Kind{apm.NeverArmed},
		},
		{
			name:  "negative: the CM's way, alternate at RTR and REARM at RTS",
			story: func(b *apmtest.Builder) { armedQP(b) },
		},
		{
			name: "negative: alternate then rearm a second later",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				b.LoadAlt(qpn, apmtest.PathB)
				b.After(time.Second).Rearm(qpn)
			},
		},
		{
			name: "negative: first seen mid-stream (no create), its migration state unknown",
			story: func(b *apmtest.Builder) {
				// SQD->RTS loading an alternate: the QP was armed or not
				// before the tool started; nothing says it is MIGRATED
				b.Modify(qpn, event.AttrState|event.AttrAltPath, func(m *event.Modify) {
					m.State, m.Alt = event.StateRTS, &apmtest.PathB
				})
				b.After(time.Minute).Create(qpn + 1)
			},
		},
		{
			name: "negative: destroyed before the deadline",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				b.LoadAlt(qpn, apmtest.PathB)
				b.After(time.Second).Destroy(qpn)
			},
		},
	})
}
