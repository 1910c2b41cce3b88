package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// QPNs are reused after destroy. A new QP with an old number starts a fresh
// history (a new generation): nothing of the old one's episode leaks in.
func TestQPNReuseStartsFresh(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "negative: migrated, destroyed before the deadline, QPN reused for a healthy QP",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				b.After(500 * time.Millisecond).Destroy(qpn)
				armedQP(b)
			},
		},
		{
			name: "negative: an unanswered LAP dies with its QP",
			story: func(b *apmtest.Builder) {
				cmQP(b)
				b.LAPHandler(0, cmID, 0)
				b.Destroy(qpn)
				armedQP(b)
				b.LAPHandler(0, cmID, 0) // comm id forgotten with the old QP: unattributed
			},
		},
		{
			name: "negative: the destroy was missed, the create starts a new history anyway",
			story: func(b *apmtest.Builder) {
				armedQP(b)
				b.PathMig(qpn)
				armedQP(b) // create of the same QPN without a destroy
			},
		},
	})
}

// A finding names the generation it belongs to.
func TestQPNReuseGenerations(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	b.PathMig(qpn)
	b.After(3 * time.Second).Destroy(qpn)
	armedQP(b)
	b.PathMig(qpn)
	got, m, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kind != apm.MissedRearm || got[1].Kind != apm.MissedRearm {
		t.Fatalf("want two missed-rearm, got %v", got)
	}
	if got[0].QP.Gen == got[1].QP.Gen || got[0].QP.QPN != got[1].QP.QPN {
		t.Errorf("keys %v and %v: want one QPN, two generations", got[0].QP, got[1].QP)
	}
	v, ok := m.Lookup(b.Device, qpn)
	if !ok || v.Key.Gen != got[1].QP.Gen || v.Episodes != 1 {
		t.Errorf("lookup %+v %v: want the second generation with one episode", v, ok)
	}
}

// A source merges per-CPU ring buffers, so an event can arrive before an
// earlier one from another CPU. The reorder stage puts them back in Boot
// order within its window; every story must give the same findings in any
// plausible arrival order.
func TestReorderedCPUStreams(t *testing.T) {
	stories := map[string]func(b *apmtest.Builder){
		"the three steps": func(b *apmtest.Builder) {
			cmQP(b)
			b.PathMig(qpn)
			b.Notify(qpn, event.EvPathMig, 0, cmID)
			b.ThreeSteps(qpn, apmtest.PathC, cmID)
			b.CommEst(qpn)
		},
		"MVAPICH2 single modify": func(b *apmtest.Builder) {
			armedQP(b)
			b.PathMig(qpn)
			b.LoadAltRearm(qpn, apmtest.PathC)
		},
		"QPN reuse": func(b *apmtest.Builder) {
			armedQP(b)
			b.PathMig(qpn)
			b.Destroy(qpn)
			armedQP(b)
		},
		"missed rearm": func(b *apmtest.Builder) {
			armedQP(b)
			b.PathMig(qpn)
			b.LoadAlt(qpn, apmtest.PathC)
		},
	}
	healthy := map[string]bool{"the three steps": true, "MVAPICH2 single modify": true, "QPN reuse": true}
	for name, story := range stories {
		b := apmtest.New()
		story(b)
		cfg := apm.DefaultConfig()
		want, _, err := apmtest.Run(cfg, b.Steps, settle)
		if err != nil {
			t.Fatal(err)
		}
		if healthy[name] != (len(want) == 0) {
			t.Errorf("%s in order: findings %v", name, want)
		}
		for seed := range uint64(50) {
			steps := apmtest.Jitter(b.Steps, 4, 20*time.Microsecond, seed)
			got, m, err := apmtest.Run(cfg, steps, settle)
			if err != nil {
				t.Fatal(err)
			}
			if !sameFindings(got, want) {
				t.Errorf("%s, arrival order %d: got %v, want %v", name, seed, got, want)
			}
			if s := m.Stats(); s.Late != 0 {
				t.Errorf("%s: %d late events inside the window", name, s.Late)
			}
		}
	}
}

// Without the reorder stage an arrival order gives false findings: the new
// alternate, seen before the PATH_MIG it follows, is taken for the old one
// and the rearm looks bare.
func TestReorderWindowIsNeeded(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	mig := b.OnCPU(0).PathMig(qpn)
	load := b.OnCPU(1).LoadAlt(qpn, apmtest.PathC)
	b.Rearm(qpn)
	n := len(b.Steps)
	arrival := append(b.Steps[:n-3:n-3], b.Steps[n-2], b.Steps[n-3], b.Steps[n-1]) // the load overtakes the PATH_MIG
	if arrival[n-2].Ev != mig || arrival[n-3].Ev != load {
		t.Fatal("bad arrival order")
	}
	for _, tc := range []struct {
		window time.Duration
		want   []apm.Kind
	}{
		{50 * time.Millisecond, nil},
		{0, []apm.Kind{apm.RearmWithoutAlt}},
	} {
		cfg := apm.DefaultConfig()
		cfg.ReorderWindow = tc.window
		got, _, err := apmtest.Run(cfg, arrival, settle)
		if err != nil {
			t.Fatal(err)
		}
		checkKinds(t, got, tc.want, nil)
	}
}

// An event later than the window is still applied (and counted), never
// dropped.
func TestLateEventIsCounted(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	late := b.PathMig(qpn)
	b.After(time.Second).LoadAlt(qpn, apmtest.PathC)
	b.After(time.Second).Rearm(qpn)
	n := len(b.Steps)
	// The PATH_MIG comes 2 s late, after events that have already left the
	// window.
	steps := append(b.Steps[:n-3:n-3], b.Steps[n-2], b.Steps[n-1], b.Steps[n-3])
	if steps[len(steps)-1].Ev != late {
		t.Fatal("bad order")
	}
	_, m, err := apmtest.Run(apm.DefaultConfig(), steps, settle)
	if err != nil {
		t.Fatal(err)
	}
	if s := m.Stats(); s.Late != 1 || s.Events != uint64(len(steps)) {
		t.Errorf("stats %+v: want 1 late of %d events", s, len(steps))
	}
}

// Destroyed QPs leave nothing behind: no history, no comm id, no timer.
func TestNoStateAfterDestroy(t *testing.T) {
	var got []apm.Finding
	m, err := apm.New(apm.DefaultConfig(), func(f apm.Finding) { got = append(got, f) })
	if err != nil {
		t.Fatal(err)
	}
	b := apmtest.New()
	for i := range uint32(2000) {
		q := 100 + i
		alt := apmtest.PathB
		b.Connect(q, apmtest.PathA, &alt)
		b.Notify(q, event.EvCommEst, -106, 7000+i)
		b.PathMig(q)
		b.MAD(event.MADRecv, event.CMAttrLAP, 7000+i)
		b.Destroy(q)
	}
	apmtest.Feed(m, b.Steps)
	m.Advance(b.Now() + uint64(time.Hour))
	if s := m.Stats(); s.QPs != 0 || s.Pending != 0 || len(got) != 0 {
		t.Errorf("after destroying every QP: %d QPs, %d pending, %d findings", s.QPs, s.Pending, len(got))
	}
	b2 := apmtest.New()
	b2.MAD(event.MADRecv, event.CMAttrLAP, 7000)
	apmtest.Feed(m, b2.Steps)
	m.Finish(m.Now())
	if s := m.Stats(); s.Unattributed != 1 {
		t.Errorf("a LAP for a destroyed QP's comm id was attributed: %+v", s)
	}
}

func sameFindings(a, b []apm.Finding) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Kind != y.Kind || x.QP != y.QP || x.Resolved != y.Resolved || x.First != y.First || len(x.Evidence) != len(y.Evidence) {
			return false
		}
		for j := range x.Evidence {
			if x.Evidence[j] != y.Evidence[j] {
				return false
			}
		}
	}
	return true
}

// A QP that vanished from the netlink table without a destroy event is
// forgotten (a TruthGone reading in the stream).
func TestGoneFreesHistory(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	b.PathMig(qpn)
	b.After(time.Second).Gone(qpn)
	got, m, err := apmtest.Run(apm.DefaultConfig(), b.Steps, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if s := m.Stats(); s.QPs != 0 || len(got) != 0 {
		t.Errorf("after Gone: %d QPs, findings %v", s.QPs, got)
	}
}

// A QP the model never saw created is in RTS when an alternate load or a
// rearm without a state transition succeeds on it; its migration state is
// unknown (it may have been armed before the tool started), so no
// never-armed.
func TestUnseenQPInfersRTS(t *testing.T) {
	b := apmtest.New()
	b.LoadAlt(qpn, apmtest.PathB) // the tool started after the QP was connected
	got, m, err := apmtest.Run(apm.DefaultConfig(), b.Steps, settle)
	if err != nil {
		t.Fatal(err)
	}
	checkKinds(t, got, nil, nil)
	if v, _ := m.Lookup(b.Device, qpn); v.State != event.StateRTS || !v.HasAlt || v.MigKnown {
		t.Errorf("view %+v: want RTS with an alternate, its migration state unknown", v)
	}
}

// A create for a QPN the model still tracks (its destroy was lost) starts a
// new generation with no episode.
func TestCreateWithoutDestroyStartsNewGeneration(t *testing.T) {
	b := apmtest.New()
	armedQP(b)
	b.PathMig(qpn)
	b.Create(qpn)
	var got []apm.Finding
	m, err := apm.New(apm.DefaultConfig(), func(f apm.Finding) { got = append(got, f) })
	if err != nil {
		t.Fatal(err)
	}
	apmtest.Feed(m, b.Steps[:5])
	m.Finish(m.Now())
	before, _ := m.Lookup(b.Device, qpn)
	apmtest.Feed(m, b.Steps[5:])
	m.Advance(b.Now() + uint64(time.Minute))
	after, ok := m.Lookup(b.Device, qpn)
	if !ok || after.Key.Gen == before.Key.Gen || after.Episodes != 0 || after.State != event.StateReset || len(got) != 0 {
		t.Errorf("before %+v after %+v findings %v: want a new generation in RESET, no episode, no finding", before, after, got)
	}
}
