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
