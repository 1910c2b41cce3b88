package apm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// PATH_MIG_ERR: the HCA tried the alternate and it failed. The QP stays on
// its failing primary with no protection.
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
				b.SeedSteps(qpn, apmtest.PathC, 0)
			},
		},
	})
}

// Each migration may be handled perfectly and still the QP keeps failing
// over: the paths themselves are bad.
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
			b.SeedSteps(qpn, alt, 0)
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
				b.After(2 * time.Minute)
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
					b.SeedSteps(qpn, p, 0)
				}
			},
		},
		{
			name:  "negative: 3 migrations over 3 minutes",
			story: func(b *apmtest.Builder) { armedQP(b); migrateEvery(b, 3, time.Minute) },
		},
		{
			name:  "negative: count raised to 4",
			cfg:   func(c *apm.Config) { c.FlapCount = 4 },
			story: func(b *apmtest.Builder) { armedQP(b); migrateEvery(b, 3, time.Second) },
		},
	})
}

// The kernel can refuse an APM modify. On a RoCE port it always refuses
// IB_QP_ALT_PATH: APM is InfiniBand-only.
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

// The finding names the errno and, for EINVAL on an alternate path, the
// RoCE rule.
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

// An alternate path does nothing until the QP is armed: a QP in RTS with a
// loaded alternate that nobody rearms has no failover.
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
			name: "negative: destroyed before the deadline",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				b.LoadAlt(qpn, apmtest.PathB)
				b.After(time.Second).Destroy(qpn)
			},
		},
	})
}

// A CM-managed QP must tell the CM about a migration with
// ib_cm_notify(PATH_MIG), or the CM sends DREQ and LAP on the dead path.
// The model calls a QP CM-managed when a CM event is tied to it (an
// ib_cm_notify, cm_lap_handler, or CM MAD by QPN or by its comm id), or when
// the caller says so (Model.MarkCM, e.g. from rdma netlink's cm_id list).
func TestCMNotNotified(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "CM-managed QP migrates, the three steps are done, the CM is never told",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.PathMig(qpn)
				b.SeedSteps(qpn, apmtest.PathC, 0)
			},
			want: []apm.Kind{apm.CMNotNotified},
		},
		{
			name: "the CM evidence comes after the migration (the LAP it sends)",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.Notify(qpn, event.EvCommEst, -106, cmID)
				b.After(time.Minute).PathMig(qpn)
				b.SeedSteps(qpn, apmtest.PathC, cmID)
			},
			want: []apm.Kind{apm.CMNotNotified},
		},
		{
			name: "negative: ib_cm_notify(PATH_MIG) succeeded",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.PathMig(qpn)
				b.Notify(qpn, event.EvPathMig, 0, cmID)
				b.SeedSteps(qpn, apmtest.PathC, cmID)
			},
		},
		{
			name: "negative: a plain verbs QP (no CM) has no CM to notify",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.SeedSteps(qpn, apmtest.PathC, 0)
			},
		},
	})
}

// A reading whose cm_id table binds an rdma_cm id to the QP is the other
// way to learn that it is CM-managed.
func TestCMNotNotifiedFromReading(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	b.Truth(qpn, event.MigArmed, event.StateRTS).Truth.CM = true
	b.PathMig(qpn)
	b.SeedSteps(qpn, apmtest.PathC, 0)
	got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	checkKinds(t, got, []apm.Kind{apm.CMNotNotified}, nil)
}
