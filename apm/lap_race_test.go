package apm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// The CM keeps its own copy of the path (for DREQ and LAP) and changes it
// only through a LAP/APR exchange or ib_cm_notify(PATH_MIG), which copies
// the cm_id's alternate into its primary only when no LAP is pending. So
// the CM must be told of the migration before it takes a LAP, and the steps
// must come in order. Each way of losing that race is a lap-race. (There is
// no COMM_EST after a migration: it exists for the first packet in RTR.)
func TestLAPRace(t *testing.T) {
	notified := func(b *apmtest.Builder) { b.Notify(qpn, event.EvPathMig, 0, cmID) }
	runScenarios(t, []scenario{
		{
			name: "ib_cm_notify(PATH_MIG) returns EINVAL: a LAP is in flight, the CM keeps the dead path",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.PathMig(qpn)
				b.Notify(qpn, event.EvPathMig, -22, cmID)
				b.ThreeSteps(qpn, apmtest.PathC, cmID)
			},
			want: []apm.Kind{apm.LAPRace},
		},
		{
			name: "a LAP reaches the CM handler and is never answered: cm_id stuck in LAP_RCVD",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.LAPHandler(0, cmID, 0) // tied to the QP by its comm id
			},
			want: []apm.Kind{apm.LAPRace},
		},
		{
			name: "a LAP arrives on the wire (ib_mad recv) and is never answered",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.MAD(event.MADRecv, event.CMAttrLAP, cmID)
				b.LAPHandler(0, cmID, 0) // the same LAP seen twice: one finding
			},
			want: []apm.Kind{apm.LAPRace},
		},
		{
			name: "the APR comes after the deadline: found, then resolved",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.MAD(event.MADRecv, event.CMAttrLAP, cmID)
				b.After(5*time.Second).MAD(event.MADSend, event.CMAttrAPR, cmID)
			},
			want:     []apm.Kind{apm.LAPRace},
			resolved: []apm.Kind{apm.LAPRace},
		},
		{
			name: "window: a LAP taken and answered between the migration and a successful notify",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.PathMig(qpn)
				b.After(time.Millisecond).LAPHandler(0, cmID, 0)
				b.After(time.Millisecond).MAD(event.MADSend, event.CMAttrAPR, cmID)
				notified(b) // lap_state IDLE again: cm_migrate copies the LAP's path
				b.LoadAltRearm(qpn, apmtest.PathC)
			},
			want: []apm.Kind{apm.LAPRace},
		},
		{
			name: "window: the LAP seen on the wire only, the notify still succeeds after it",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.PathMig(qpn)
				b.After(time.Millisecond).MAD(event.MADRecv, event.CMAttrLAP, cmID)
				b.After(time.Millisecond).MAD(event.MADSend, event.CMAttrAPR, cmID)
				notified(b)
				b.LoadAltRearm(qpn, apmtest.PathC)
			},
			want: []apm.Kind{apm.LAPRace},
		},
		{
			name: "negative: the LAP comes after the notify (the peer's new alternate, in order)",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.PathMig(qpn)
				notified(b)
				b.After(time.Millisecond).LAPHandler(0, cmID, 0)
				b.After(time.Millisecond).MAD(event.MADSend, event.CMAttrAPR, cmID)
				b.LoadAltRearm(qpn, apmtest.PathC)
			},
		},
		{
			name: "negative: ib_cm_notify(COMM_EST) after a migration returns EISCONN (established): no window",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.PathMig(qpn)
				notified(b)
				b.Notify(qpn, event.EvCommEst, -106, cmID)
				b.After(time.Millisecond)
				b.MAD(event.MADSend, event.CMAttrLAP, cmID)
				b.LoadAltRearm(qpn, apmtest.PathC)
			},
		},
		{
			name: "rearm before the alternate load in the same episode (steps 2 and 3 swapped)",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.Rearm(qpn)
				b.After(100*time.Millisecond).LoadAlt(qpn, apmtest.PathC)
			},
			want: []apm.Kind{apm.LAPRace},
		},
		{
			name: "negative: an alternate loaded long after a bare rearm is a new load, not a swapped step",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.Rearm(qpn)
				b.After(10*time.Second).LoadAlt(qpn, apmtest.PathC)
				b.Rearm(qpn)
			},
			want: []apm.Kind{apm.RearmWithoutAlt},
		},
		{
			name: "negative: a QP without the CM loads its alternate after COMM_EST (no LAP to race)",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(time.Millisecond).CommEst(qpn)
				b.After(time.Millisecond)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
			},
		},
		{
			name: "negative: LAP answered with an APR in time",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.LAPHandler(0, cmID, 0)
				b.After(10*time.Millisecond).MAD(event.MADSend, event.CMAttrAPR, cmID)
			},
		},
		{
			name: "negative: a LAP the CM itself refused (RoCE port) leaves no cm_id waiting",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.LAPHandler(0, cmID, -22)
			},
		},
		{
			name: "negative: notify, LAP, alternate and rearm in order; a COMM_EST event changes nothing",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.PathMig(qpn)
				notified(b)
				b.ThreeSteps(qpn, apmtest.PathC, cmID)
				b.After(time.Millisecond).CommEst(qpn)
			},
		},
		{
			name: "negative: another alternate after a proper rearm (allowed while ARMED)",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.ThreeSteps(qpn, apmtest.PathC, 0)
				b.After(100*time.Millisecond).LoadAlt(qpn, apmtest.PathA)
			},
		},
	})
}

// A failed notify explains itself with the unanswered LAP when there was one.
func TestLAPRaceNotifyExplainsUnansweredLAP(t *testing.T) {
	b := apmtest.New()
	cmQP(b)
	b.LAPHandler(qpn, cmID, 0)
	b.After(100 * time.Millisecond).PathMig(qpn)
	n := b.Notify(qpn, event.EvPathMig, -22, cmID)
	got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps[:len(b.Steps)], time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := findOne(t, got, apm.LAPRace, false)
	if f.Errno != 22 || !strings.Contains(f.Explanation, "LAP") || f.Evidence[len(f.Evidence)-1].Seq != n.Seq {
		t.Errorf("finding %+v: want errno 22, the LAP in the explanation and the notify as last evidence", f)
	}
}

// The tracepoint and the handler see the same LAP: the finding points at the
// first sighting, from which the deadline counts.
func TestLAPRaceStuckCountsFromFirstSighting(t *testing.T) {
	b := apmtest.New()
	cmQP(b)
	first := b.MAD(event.MADRecv, event.CMAttrLAP, cmID)
	b.After(time.Millisecond).LAPHandler(0, cmID, 0)
	got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f := findOne(t, got, apm.LAPRace, false)
	if len(f.Evidence) != 1 || f.Evidence[0].Seq != first.Seq || f.Last != first.Boot+uint64(2*time.Second) {
		t.Errorf("evidence %+v last %d: want the first LAP and its deadline", f.Evidence, f.Last)
	}
}

// A LAP the CM refused is no race; the linger window is its own threshold;
// a comm id reused by a new QP belongs to the new QP.
func TestLAPRaceExactness(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "negative: the LAP arrives on the wire and cm_lap_handler refuses it",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.MAD(event.MADRecv, event.CMAttrLAP, cmID)
				b.After(time.Millisecond).LAPHandler(0, cmID, -22)
			},
		},
		{
			name: "a load 3 s after a bare rearm is past the linger even when the notify deadline is longer",
			cfg:  func(c *apm.Config) { c.NotifyDeadline = 10 * time.Second },
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.Rearm(qpn)
				b.After(3*time.Second).LoadAlt(qpn, apmtest.PathC)
			},
			want: []apm.Kind{apm.RearmWithoutAlt},
		},
		{
			name: "a comm id reused by a new QP: its unanswered LAP is the new QP's",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.Notify(qpn+1, event.EvCommEst, -106, cmID) // another QP now has the comm id
				b.Destroy(qpn)                               // the old QP goes: the new binding stays
				b.LAPHandler(0, cmID, 0)
			},
			want: []apm.Kind{apm.LAPRace},
		},
	})
}

// The LAP of a reused comm id names the QP that has it now.
func TestLAPRaceReusedCommID(t *testing.T) {
	b := apmtest.New()
	cmQP(b)
	b.Notify(qpn+1, event.EvCommEst, -106, cmID)
	b.Destroy(qpn)
	b.LAPHandler(0, cmID, 0)
	got, _, err := apmtest.Run(apm.DefaultConfig(), b.Steps, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if f := findOne(t, got, apm.LAPRace, false); f.QP.QPN != qpn+1 {
		t.Errorf("lap-race on %v, want the QP that now holds the comm id (%d)", f.QP, qpn+1)
	}
}
