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

// portActive is the port event of a link coming back.
func portActive(b *apmtest.Builder, port uint32) {
	b.Add(&event.Event{Kind: event.KindPortEvent, Port: &event.PortEvent{Type: event.EvPortActive, Port: port}})
}

// A QP running without a valid armed alternate that then loses its
// connection: the failure APM exists to survive.
func TestUnprotectedFailure(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "missed rearm, then the new primary fails past the retry window: the QP reads ERR",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn) // now on B
				b.After(3 * time.Minute)
				portErr(b, apmtest.PathB.Port)
				b.After(4*time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
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
			name: "a stuck rearm, then a PORT_ERR and the QP reads ERR",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				for range 12 {
					b.After(time.Second).Truth(qpn, event.MigRearm, event.StateRTS)
				}
				portErr(b, apmtest.PathA.Port)
				b.After(2*time.Second).Truth(qpn, event.MigRearm, event.StateErr)
			},
			want:     []apm.Kind{apm.StuckRearm, apm.UnprotectedFailure},
			resolved: []apm.Kind{apm.StuckRearm}, // it left RTS
		},
		{
			name: "rearmed without a new alternate, then the QP reads ERR; once per generation",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.Rearm(qpn)
				b.After(3 * time.Minute)
				portErr(b, apmtest.PathB.Port)
				b.After(time.Second).Truth(qpn, event.MigArmed, event.StateErr)
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
				b.After(10*time.Second).Truth(qpn, event.MigArmed, event.StateRTS) // armed: B carries traffic
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

// Deaths that are not path failures: a QP error event (a local
// catastrophic error, an application or protocol error) and a QP gone to
// ERR with no port failure anywhere on the host (the peer went away) are
// no unprotected-failure, however unprotected the QP was; readings in ERR
// are no mig-state mismatch.
func TestDeathsNotPathFailures(t *testing.T) {
	unprotectedThen := func(death func(b *apmtest.Builder)) func(b *apmtest.Builder) {
		return func(b *apmtest.Builder) {
			armedQP(b)
			b.PathMig(qpn) // missed rearm: unprotected from here
			b.After(3 * time.Minute)
			death(b)
		}
	}
	var rows []scenario
	for _, ev := range []event.EventType{event.EvQPFatal, event.EvQPReqErr, event.EvQPAccessErr} {
		rows = append(rows, scenario{
			name:  "negative: " + ev.String() + " on an unprotected QP",
			story: unprotectedThen(func(b *apmtest.Builder) { b.QPEvent(qpn, ev) }),
			want:  []apm.Kind{apm.MissedRearm},
		}, scenario{
			name: "negative: " + ev.String() + " after a PORT_ERR on the QP's port, read ERR later",
			story: unprotectedThen(func(b *apmtest.Builder) {
				portErr(b, apmtest.PathB.Port)
				b.After(time.Second).QPEvent(qpn, ev)
				b.After(time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
			}),
			want: []apm.Kind{apm.MissedRearm},
		})
	}
	rows = append(rows, scenario{
		name: "negative: reads ERR with no port event anywhere (the peer went away)",
		story: unprotectedThen(func(b *apmtest.Builder) {
			b.Truth(qpn, event.MigMigrated, event.StateErr)
		}),
		want: []apm.Kind{apm.MissedRearm},
	}, scenario{
		name: "negative: reads ERR after a PORT_ERR older than the failure window",
		story: unprotectedThen(func(b *apmtest.Builder) {
			portErr(b, apmtest.PathA.Port)
			b.After(apm.DefaultConfig().PortFailureWindow+time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
		}),
		want: []apm.Kind{apm.MissedRearm},
	}, scenario{
		name: "reads ERR after a PORT_ERR on another port of the host",
		story: unprotectedThen(func(b *apmtest.Builder) {
			portErr(b, 7)
			b.After(time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
		}),
		want: []apm.Kind{apm.MissedRearm, apm.UnprotectedFailure},
	}, scenario{
		name: "negative: a rearmed QP that reads MIGRATED in ERR is no mig-state mismatch",
		story: func(b *apmtest.Builder) {
			armedQP(b)
			b.PathMig(qpn)
			b.ThreeSteps(qpn, apmtest.PathC, 0)
			b.After(2*time.Second).Truth(qpn, event.MigArmed, event.StateRTS) // proven: traffic flows
			b.After(5*time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
			b.After(5*time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
		},
	})
	runScenarios(t, rows)
}

// The finding names its cause and the time without protection.
func TestUnprotectedFailureNamesItsCause(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	mig := b.PathMig(qpn)
	b.After(3 * time.Minute)
	portErr(b, apmtest.PathB.Port)
	b.After(time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
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

// A migration copies the alternate into the primary. A rearm with no new
// alternate then arms onto the path the QP runs on: when that path fails
// the HCA "migrates" onto it (PATH_MIG) and the QP dies. That death is the
// cost of the rearm without a new alternate, not proof of protection.
func TestUnprotectedFailureAfterCopyMigration(t *testing.T) {
	bareRearmed := func(b *apmtest.Builder) {
		armedQP(b)
		b.PathMig(qpn) // A -> B; the alternate stays B
		b.Rearm(qpn)   // armed onto B itself
		b.After(5 * time.Minute)
	}
	runScenarios(t, []scenario{
		{
			name: "PATH_MIG onto the same path, then the QP reads ERR",
			story: func(b *apmtest.Builder) {
				bareRearmed(b)
				b.PathMig(qpn) // B -> B
				b.After(20*time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
			},
			want: []apm.Kind{apm.RearmWithoutAlt, apm.MissedRearm, apm.UnprotectedFailure},
		},
		{
			name: "PATH_MIG onto the same path, then the owner's teardown (no PORT_ERR seen)",
			story: func(b *apmtest.Builder) {
				bareRearmed(b)
				b.PathMig(qpn)
				b.After(time.Second).ToState(qpn, event.StateErr)
				b.Destroy(qpn)
			},
			want: []apm.Kind{apm.RearmWithoutAlt, apm.UnprotectedFailure},
		},
		{
			name: "no PATH_MIG (a firmware that zeroes the alternate): PORT_ERR, then the owner's teardown",
			story: func(b *apmtest.Builder) {
				bareRearmed(b)
				portErr(b, apmtest.PathB.Port)
				b.After(40*time.Second).ToState(qpn, event.StateErr)
			},
			want: []apm.Kind{apm.RearmWithoutAlt, apm.UnprotectedFailure},
		},
		{
			name: "negative: a new alternate loaded with the rearm: the next PATH_MIG moves onto it",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(5 * time.Minute).PathMig(qpn) // B -> C
				b.LoadAltRearm(qpn, apmtest.PathA)
				b.After(time.Second).ToState(qpn, event.StateErr)
			},
		},
	})
}

// The finding names the rearm without a new alternate as its cause.
func TestUnprotectedFailureAfterCopyMigrationNamesTheRearm(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	b.PathMig(qpn)
	b.Rearm(qpn)
	b.After(5 * time.Minute).PathMig(qpn)
	b.After(time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
	got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
	if err != nil {
		t.Fatal(err)
	}
	noAlt := findOne(t, got, apm.RearmWithoutAlt, false)
	if f := findOne(t, got, apm.UnprotectedFailure, false); f.Cause != noAlt.ID {
		t.Errorf("unprotected-failure cause %d, want the rearm-without-new-alternate %d", f.Cause, noAlt.ID)
	}
	for _, f := range got {
		if f.Kind == apm.MigrationError {
			t.Errorf("a migration-error as well: %s", f.String())
		}
	}
}

// An alternate load the kernel refused, on a QP with no armed alternate,
// leaves it unprotected (Open MPI 4.1's openib loads its alternate with
// alt_ah_attr.port_num 0, which ib_uverbs refuses with EINVAL): its death
// on a path failure is unprotected-failure, with the refusal as cause.
func TestUnprotectedFailureAfterRefusedAltLoad(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "load with rearm refused, then PORT_ERR on its primary port and the QP reads ERR",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				apmtest.Fail(b.LoadAltRearm(qpn, apmtest.PathB), 22)
				b.After(30 * time.Second)
				portErr(b, apmtest.PathA.Port)
				b.After(time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
			},
			want: []apm.Kind{apm.APMModifyFailed, apm.UnprotectedFailure},
		},
		{
			name: "negative: load refused, PORT_ERR on its primary port, the owner tears it down (nothing shows traffic)",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				apmtest.Fail(b.LoadAltRearm(qpn, apmtest.PathB), 22)
				b.After(30 * time.Second)
				portErr(b, apmtest.PathA.Port)
				b.After(5 * time.Second).Destroy(qpn)
			},
			want: []apm.Kind{apm.APMModifyFailed},
		},
		{
			name: "negative: a later load and rearm succeed before the failure",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				apmtest.Fail(b.LoadAltRearm(qpn, apmtest.PathB), 22)
				b.After(time.Second).LoadAltRearm(qpn, apmtest.PathB)
				b.After(30 * time.Second)
				portErr(b, apmtest.PathA.Port)
				b.After(time.Second).Truth(qpn, event.MigRearm, event.StateErr)
			},
			want: []apm.Kind{apm.APMModifyFailed},
		},
		{
			name: "negative: RoCE, where APM cannot work: an alternate with no DLID refused",
			story: func(b *apmtest.Builder) {
				b.Connect(qpn, apmtest.PathA, nil)
				roce := event.Path{Port: 1, IsGlobal: true, DGID: [16]byte{0xfe, 0x80, 15: 2}}
				apmtest.Fail(b.LoadAltRearm(qpn, roce), 22)
				b.After(30 * time.Second)
				portErr(b, apmtest.PathA.Port)
				b.After(time.Second).Truth(qpn, event.MigMigrated, event.StateErr)
			},
			want: []apm.Kind{apm.APMModifyFailed},
		},
		{
			name: "negative: a refused reload on an armed QP leaves its armed alternate",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				apmtest.Fail(b.LoadAlt(qpn, apmtest.PathC), 22)
				b.After(30 * time.Second)
				portErr(b, apmtest.PathA.Port)
				b.After(time.Second).Truth(qpn, event.MigArmed, event.StateErr)
			},
			want: []apm.Kind{apm.APMModifyFailed},
		},
	})
}

// A stuck rearm with no sign of traffic (information) leaves a QP
// unprotected only as far as the hardware shows: its owner tearing it down
// after a port failure (Open MPI's QPs at the end of a job that survived
// the failure on its other QPs) is no loss, a reading in ERR is.
func TestUnprotectedFailureIdleTeardown(t *testing.T) {
	idleStuck := func(b *apmtest.Builder) {
		armedQP(b)
		for range 12 {
			b.After(time.Second).Truth(qpn, event.MigRearm, event.StateRTS)
		}
		portErr(b, apmtest.PathA.Port)
	}
	runScenarios(t, []scenario{
		{
			name: "negative: idle and REARM, PORT_ERR on its port, the owner destroys it",
			story: func(b *apmtest.Builder) {
				idleStuck(b)
				b.After(10 * time.Second).Destroy(qpn)
			},
			want: []apm.Kind{apm.StuckRearm},
		},
		{
			name: "negative: idle and REARM, PORT_ERR on its port, the owner moves it to ERR",
			story: func(b *apmtest.Builder) {
				idleStuck(b)
				b.After(10*time.Second).ToState(qpn, event.StateErr)
			},
			want: []apm.Kind{apm.StuckRearm},
		},
		{
			name: "idle and REARM, PORT_ERR on its port, then the QP reads ERR by the hardware's hand",
			story: func(b *apmtest.Builder) {
				idleStuck(b)
				b.After(2*time.Second).Truth(qpn, event.MigRearm, event.StateErr)
			},
			want:     []apm.Kind{apm.StuckRearm, apm.UnprotectedFailure},
			resolved: []apm.Kind{apm.StuckRearm},
		},
	})
}
