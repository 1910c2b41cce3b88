package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
)

// A rearm arms whatever alternate the QP holds. After a migration that is
// nothing valid (the old alternate became the primary), and "a stale or
// invalid alternate path raises no error when software rearms". So a rearm
// must come with, or after, a new alternate on another route.
func TestRearmWithoutNewAlternate(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "rearm only (step 3 without steps 1-2)",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(10 * time.Millisecond).Rearm(qpn)
			},
			want: []apm.Kind{apm.RearmWithoutAlt},
		},
		{
			name: "the new alternate equals the primary the QP now runs on",
			story: func(b *apmtest.Builder) {
				armedQP(b)     // primary A, alternate B
				b.PathMig(qpn) // now on B
				b.After(10 * time.Millisecond)
				b.ThreeSteps(qpn, apmtest.PathB, 0)
			},
			want: []apm.Kind{apm.RearmWithoutAlt},
		},
		{
			name: "the alternate load was refused (RoCE: EINVAL) and the rearm went ahead",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				apmtest.Fail(b.LoadAlt(qpn, apmtest.PathC), 22)
				b.Rearm(qpn)
			},
			want: []apm.Kind{apm.APMModifyFailed, apm.RearmWithoutAlt},
		},
		{
			name: "second migration, rearmed again without a new alternate: one finding per episode",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.Rearm(qpn)
				b.After(10 * time.Second).PathMig(qpn)
				b.Rearm(qpn)
			},
			want: []apm.Kind{apm.RearmWithoutAlt, apm.RearmWithoutAlt},
		},
		{
			name: "negative: the three steps",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
			},
		},
		{
			name: "negative: returning to the path it left is a new alternate (the path came back)",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn) // A -> B
				b.ThreeSteps(qpn, apmtest.PathA, 0)
			},
		},
		{
			name: "negative: the LMC path of the primary's port and DLID (other source path bits: another SLID, the responses come back another way) is a new alternate",
			story: func(b *apmtest.Builder) {
				armedQP(b)     // primary A, alternate B
				b.PathMig(qpn) // now on B
				lmc := apmtest.PathB
				lmc.SrcPathBits = 1
				b.ThreeSteps(qpn, lmc, 0)
			},
		},
		{
			name: "negative: MVAPICH2 loads and rearms in one modify",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.LoadAltRearm(qpn, apmtest.PathC)
			},
		},
		{
			name: "negative: rearming at connection setup is no episode",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				b.LoadAlt(qpn, apmtest.PathB)
				b.Rearm(qpn)
				b.Rearm(qpn)
			},
		},
		{
			name: "negative: loading a new alternate while still ARMED is allowed",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.After(time.Second).LoadAlt(qpn, apmtest.PathC)
			},
		},
	})
}

// The alternate in force at the rearm is what counts: the last load of the
// episode, compared with the primary at that time, not the first load.
func TestRearmWithoutNewAlternateJudgesTheLastLoad(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "negative: a load onto the primary, corrected by a second load before the rearm",
			story: func(b *apmtest.Builder) {
				armedQP(b)     // primary A, alternate B
				b.PathMig(qpn) // now on B
				b.LoadAlt(qpn, apmtest.PathB)
				b.LoadAlt(qpn, apmtest.PathC)
				b.Rearm(qpn)
			},
		},
		{
			name: "a good load, then a second load onto the primary, then the rearm",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.LoadAlt(qpn, apmtest.PathC)
				b.LoadAlt(qpn, apmtest.PathB)
				b.Rearm(qpn)
			},
			want: []apm.Kind{apm.RearmWithoutAlt},
		},
		{
			name: "a load onto the primary and the rearm in one modify",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.LoadAltRearm(qpn, apmtest.PathB)
			},
			want: []apm.Kind{apm.RearmWithoutAlt},
		},
		{
			name: "negative: the primary moved (a new primary path loaded) and the alternate is the old primary",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn) // now on B
				b.LoadAlt(qpn, apmtest.PathA)
				b.Rearm(qpn)
			},
		},
	})
}
