package apm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

func TestAPMModifyFailed(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "alternate load refused with EINVAL (RoCE)",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				apmtest.Fail(b.LoadAlt(qpn, apmtest.PathB), 22)
			},
			want: []apm.Kind{apm.APMModifyFailed},
		},
		{
			name: "rearm refused",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				apmtest.Fail(b.Rearm(qpn), 22)
			},
			want: []apm.Kind{apm.APMModifyFailed},
		},
		{
			name: "forced migration refused",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				apmtest.Fail(b.ForceMigrate(qpn), 22)
			},
			want: []apm.Kind{apm.APMModifyFailed},
		},
		{
			name: "the same refusal again is not a new finding; another errno is",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				apmtest.Fail(b.LoadAlt(qpn, apmtest.PathB), 22)
				apmtest.Fail(b.LoadAlt(qpn, apmtest.PathB), 22)
				apmtest.Fail(b.LoadAlt(qpn, apmtest.PathB), 95)
			},
			want: []apm.Kind{apm.APMModifyFailed, apm.APMModifyFailed},
		},
		{
			name: "REARM on an ARMED QP refused (rdmavt): evidence only, the QP stays armed and migrates",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				apmtest.Fail(b.Rearm(qpn), 22)
				b.After(10 * time.Second).PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
			},
			want: []apm.Kind{apm.APMModifyFailed},
		},
		{
			name: "MIGRATED from REARM refused (rdmavt): no forced migration, no episode",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				apmtest.Fail(b.After(10*time.Millisecond).ForceMigrate(qpn), 22)
			},
			want: []apm.Kind{apm.APMModifyFailed},
		},
		{
			name: "negative: a refused modify that touches no APM attribute",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				apmtest.Fail(b.ToState(qpn, event.StateSQD), 22)
			},
		},
	})
}

func TestAPMModifyFailedHint(t *testing.T) {
	b := apmtest.New()
	b.Connect(qpn, apmtest.PathA, nil)
	ev := apmtest.Fail(b.LoadAlt(qpn, apmtest.PathB), 22)
	got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := findOne(t, got, apm.APMModifyFailed, false)
	if f.Errno != 22 || !strings.Contains(f.Remediation, "RoCE") || f.Evidence[0].Seq != ev.Seq {
		t.Errorf("finding %+v: want errno 22, the RoCE hint and the modify as evidence", f)
	}
}

// TestAPMModifyFailedUverbsAltPort: an alternate load ib_uverbs refused
// because its address vector's port differs from alt_port_num says so,
// and how to mend it; one refused there for another reason says only
// where it was refused.
func TestAPMModifyFailedUverbsAltPort(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ahPort    uint32
		say, hint string
	}{
		{"port mismatch", 0, "names port 0, alt_port_num 2", "alt_ah_attr.port_num"},
		{"ports equal", 2, "ib_uverbs refused the command itself", "RoCE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := apmtest.New()
			b.Connect(qpn, apmtest.PathA, nil)
			ev := apmtest.Fail(b.LoadAlt(qpn, apmtest.PathB), 22)
			ev.Modify.Hook, ev.Modify.AltAHPort = "ib_uverbs_modify_qp", tc.ahPort
			ev.Modify.Alt.Port = 2
			got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			f := findOne(t, got, apm.APMModifyFailed, false)
			if !strings.Contains(f.Explanation, tc.say) || !strings.Contains(f.Remediation, tc.hint) ||
				!strings.Contains(f.Evidence[0].What, "refused by ib_uverbs_modify_qp") {
				t.Errorf("finding %+v: want %q in the explanation, %q in the remediation", f, tc.say, tc.hint)
			}
			if tc.ahPort == 2 && strings.Contains(f.Explanation, "address vector") {
				t.Errorf("equal ports named as the cause: %s", f.Explanation)
			}
		})
	}
}

// Each refused PATH_MIG_STATE says which state it is taken from.
func TestAPMModifyFailedMigStateHints(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(b *apmtest.Builder) *event.Event
		say    string
	}{
		{"rearm", func(b *apmtest.Builder) *event.Event { return b.Rearm(qpn) }, "only from MIGRATED"},
		{"forced", func(b *apmtest.Builder) *event.Event { return b.ForceMigrate(qpn) }, "only from ARMED"},
		{"armed", func(b *apmtest.Builder) *event.Event { return b.Arm(qpn) }, "refuse ARMED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := apmtest.New()
			armedQP(b)
			apmtest.Fail(tc.modify(b), 22)
			got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if f := findOne(t, got, apm.APMModifyFailed, false); !strings.Contains(f.Remediation, tc.say) {
				t.Errorf("hint %q does not say %q", f.Remediation, tc.say)
			}
		})
	}
}
