package apm_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// fault is one class of mistake an application can make after a migration,
// or a failure the application cannot prevent.
type fault string

const (
	noFault         fault = ""
	skipRearm       fault = "skip the rearm"
	loadNoRearm     fault = "load the new alternate, never rearm"
	rearmBeforeLoad fault = "rearm before the load"
	loadOntoPrimary fault = "load the primary as the alternate"
	bareRearm       fault = "rearm without a new alternate"
	lateRearm       fault = "rearm after the deadline"
	noNotify        fault = "never notify the CM"
	lapUnanswered   fault = "never answer a received LAP"
	lapBeforeNotify fault = "answer the peer's LAP before notifying the CM"
	migErr          fault = "the alternate fails (PATH_MIG_ERR, a firmware's way)"
	deadAlt         fault = "the alternate is dead (PATH_MIG, then the QP dies on it)"
	bareRearmFails  fault = "rearm without a new alternate, then the path fails"
	// deaths that are not path failures, after a correct life: no finding
	appErrDeath fault = "an application or local error kills the QP (QP_ACCESS_ERR, QP_REQ_ERR, QP_FATAL)"
	peerGone    fault = "the peer goes away: the QP reads ERR with no port event"
)

// faultFindings is what each fault must give: exactly these findings and
// resolutions, nothing else.
var faultFindings = map[fault]struct{ want, resolved []apm.Kind }{
	noFault:         {},
	skipRearm:       {want: []apm.Kind{apm.MissedRearm}},
	loadNoRearm:     {want: []apm.Kind{apm.MissedRearm}},
	rearmBeforeLoad: {want: []apm.Kind{apm.LAPRace}},
	loadOntoPrimary: {want: []apm.Kind{apm.RearmWithoutAlt}},
	bareRearm:       {want: []apm.Kind{apm.RearmWithoutAlt}},
	lateRearm:       {want: []apm.Kind{apm.MissedRearm}, resolved: []apm.Kind{apm.MissedRearm}},
	noNotify:        {want: []apm.Kind{apm.CMNotNotified}},
	lapUnanswered:   {want: []apm.Kind{apm.LAPRace}},
	lapBeforeNotify: {want: []apm.Kind{apm.LAPRace}},
	migErr:          {want: []apm.Kind{apm.MigrationError}},
	deadAlt:         {want: []apm.Kind{apm.MigrationError}},
	bareRearmFails:  {want: []apm.Kind{apm.RearmWithoutAlt, apm.UnprotectedFailure}},
	appErrDeath:     {},
	peerGone:        {},
}

var allFaults = []fault{noFault, skipRearm, loadNoRearm, rearmBeforeLoad, loadOntoPrimary, bareRearm, lateRearm,
	noNotify, lapUnanswered, lapBeforeNotify, migErr, deadAlt, bareRearmFails, appErrDeath, peerGone}

// cmOnly faults need a CM-managed QP.
var cmOnly = map[fault]bool{noNotify: true, lapUnanswered: true, lapBeforeNotify: true}

// routes the generator picks paths from: two ports, each towards two LIDs.
var routes = []event.Path{{Port: 1, DLID: 0x11}, {Port: 2, DLID: 0x22}, {Port: 1, DLID: 0x33}, {Port: 2, DLID: 0x44}}

// story generates a legal life of one RC QP on an HCA that behaves as IBTA
// and rdmavt do, driven by a correct application on both ends: connect
// with an alternate and arm; a path fails only when the retries run out
// (a PORT_ERR may come up to a minute before the PATH_MIG), and a
// migration copies the alternate into the primary; software may force a
// migration, its PATH_MIG raised inside the modify call (before the
// modify's exit stamp), after it, or not at all; no COMM_EST after a
// migration. At each migration the application tells the CM, sends the
// LAP, loads a new alternate on a live route and rearms; it answers every
// LAP received; readings are consistent with all of it. f is injected at
// its last migration.
func story(seed uint64, f fault) *apmtest.Builder {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	b := apmtest.New()
	qpn := uint32(100 + r.IntN(1<<20))
	cm := cmOnly[f] || r.IntN(2) == 0
	comm := uint32(0x1000 + r.IntN(1<<16))
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+r.IntN(hi-lo+1)) * time.Millisecond }
	other := func(not event.Path, down uint32) event.Path {
		for {
			if p := routes[r.IntN(len(routes))]; !p.SameRoute(not) && p.Port != down {
				return p
			}
		}
	}
	port := func(t event.EventType, p uint32) {
		b.Add(&event.Event{Kind: event.KindPortEvent, Port: &event.PortEvent{Type: t, Port: p}})
	}
	read := func(mig event.MigState) {
		if r.IntN(3) == 0 {
			b.After(ms(0, 5)).Truth(qpn, mig, event.StateRTS)
		}
	}
	primary := routes[r.IntN(len(routes))]
	alt := other(primary, 0)
	connAlt := alt // the event keeps a pointer: give it its own copy
	b.Connect(qpn, primary, &connAlt)
	if cm {
		b.Notify(qpn, event.EvCommEst, -106, comm)
	}
	read(event.MigArmed)
	n := 1 + r.IntN(4)
	for i := range n {
		b.After(151*time.Second + ms(0, 5000)) // never three in a flapping window
		faulty := i == n-1 && f != noFault
		if faulty && f == migErr {
			b.PathMigErr(qpn)
			break
		}
		down := uint32(0) // a port that failed and has not come back
		switch {
		case faulty && f == deadAlt:
			port(event.EvPortErr, alt.Port) // the alternate's port went first
			if r.IntN(2) == 0 {
				b.After(ms(0, 1000))
				port(event.EvPortErr, primary.Port)
			}
			b.After(ms(500, 60000)).PathMig(qpn) // the retries on the primary ran out
			down = alt.Port
		case r.IntN(4) == 0:
			switch r.IntN(3) { // software moves to the alternate
			case 0:
				b.PathMig(qpn) // rdmavt: raised inside the modify call
				b.After(ms(0, 1) / 10).ForceMigrate(qpn)
			case 1:
				b.ForceMigrate(qpn)
				b.After(ms(0, 3)).PathMig(qpn)
			default:
				b.ForceMigrate(qpn)
			}
		default:
			if alt.Port != primary.Port && r.IntN(2) == 0 {
				port(event.EvPortErr, primary.Port)
				down = primary.Port
				b.After(ms(500, 60000))
			}
			b.PathMig(qpn)
		}
		primary = alt // a copy: the alternate stays as it was
		read(event.MigMigrated)
		if cm && !(faulty && (f == noNotify || f == lapBeforeNotify)) {
			b.After(ms(0, 2)).Notify(qpn, event.EvPathMig, 0, comm)
		}
		if cm && r.IntN(3) == 0 || faulty && (f == lapUnanswered || f == lapBeforeNotify) {
			b.After(ms(0, 10)).MAD(event.MADRecv, event.CMAttrLAP, comm)
			if !(faulty && f == lapUnanswered) {
				b.After(ms(1, 200)).MAD(event.MADSend, event.CMAttrAPR, comm)
			}
			if faulty && f == lapBeforeNotify {
				b.After(ms(0, 10)).Notify(qpn, event.EvPathMig, 0, comm)
			}
		}
		next := other(primary, down)
		b.After(ms(1, 500))
		switch {
		case faulty && f == skipRearm:
		case faulty && f == loadNoRearm:
			b.LoadAlt(qpn, next)
		case faulty && f == rearmBeforeLoad:
			b.Rearm(qpn)
			b.After(ms(1, 100)).LoadAlt(qpn, next)
		case faulty && f == loadOntoPrimary:
			b.LoadAlt(qpn, primary)
			b.Rearm(qpn)
			next = primary
		case faulty && (f == bareRearm || f == bareRearmFails):
			b.Rearm(qpn)
			next = primary // armed onto the path it runs on
		case faulty && f == lateRearm:
			b.After(3*time.Second).ThreeSteps(qpn, next, 0)
		case r.IntN(3) == 0:
			if cm {
				b.MAD(event.MADSend, event.CMAttrLAP, comm)
			}
			b.LoadAltRearm(qpn, next) // MVAPICH2's one modify
		default:
			c := uint32(0)
			if cm {
				c = comm
			}
			b.ThreeSteps(qpn, next, c)
		}
		alt = next
		switch {
		case faulty && f == deadAlt:
			read(event.MigRearm) // never ARMED: no packet comes on the dead path
			b.After(ms(500, 60000))
			if r.IntN(2) == 0 {
				b.Truth(qpn, event.MigRearm, event.StateErr) // RETRY_EXC_ERR: ERR, no event
			} else {
				b.ToState(qpn, event.StateErr) // the owner reacts to its error completion
			}
		case faulty && f == bareRearmFails:
			b.After(ms(100, 3000))
			read(event.MigArmed)
			b.After(180 * time.Second).PathMig(qpn) // its path fails: a "migration" onto itself
			b.After(ms(500, 1900))
			if r.IntN(2) == 0 {
				b.Truth(qpn, event.MigMigrated, event.StateErr)
			} else {
				b.ToState(qpn, event.StateErr)
			}
		case !faulty || f == lateRearm || f == rearmBeforeLoad || f == loadOntoPrimary || f == bareRearm:
			read(event.MigRearm)
			b.After(ms(100, 3000))
			read(event.MigArmed) // the peer rearmed too and traffic flows
		}
		if down != 0 && !(faulty && f == deadAlt) {
			b.After(ms(1000, 20000))
			port(event.EvPortActive, down) // the failed port comes back
		}
	}
	b.After(5 * time.Second)
	switch f {
	case appErrDeath:
		b.QPEvent(qpn, []event.EventType{event.EvQPAccessErr, event.EvQPReqErr, event.EvQPFatal}[r.IntN(3)])
		b.After(ms(100, 2000)).Truth(qpn, event.MigArmed, event.StateErr)
	case peerGone:
		b.After(portFailureWindowPast).Truth(qpn, event.MigArmed, event.StateErr)
	}
	if r.IntN(2) == 0 {
		b.ToState(qpn, event.StateErr)
	}
	b.Destroy(qpn)
	return b
}

// portFailureWindowPast is past the failure window of any PORT_ERR of the
// story: a death then has no port event to show for it.
var portFailureWindowPast = apm.DefaultConfig().PortFailureWindow + time.Second

// A correct application never gets a finding, and each fault class gives
// exactly its finding, in any arrival order the per-CPU ring buffers can
// produce within the reorder window.
func TestPropertyLegalBehaviour(t *testing.T) {
	runs := 3000
	if testing.Short() {
		runs = 300
	}
	faults := allFaults
	cfg := apm.DefaultConfig()
	for seed := range uint64(runs) {
		f := faults[seed%uint64(len(faults))]
		b := story(seed, f)
		steps := apmtest.Jitter(b.Steps, 4, 30*time.Millisecond, seed)
		got, m, err := apmtest.Run(cfg, steps, settle)
		if err != nil {
			t.Fatal(err)
		}
		exp := faultFindings[f]
		if msg := kindsDiff(got, exp.want, exp.resolved); msg != "" {
			t.Errorf("seed %d, fault %q: %s", seed, f, msg)
			for _, x := range got {
				t.Logf("  %s", x.String())
			}
			continue
		}
		if s := m.Stats(); s.Late != 0 || s.QPs != 0 {
			t.Errorf("seed %d, fault %q: %d late inputs inside the window, %d QPs left after the destroy", seed, f, s.Late, s.QPs)
		}
	}
}

func kindsDiff(got []apm.Finding, want, resolved []apm.Kind) string {
	var gk, gr []apm.Kind
	for _, f := range got {
		if f.Resolved {
			gr = append(gr, f.Kind)
		} else {
			gk = append(gk, f.Kind)
		}
		if f.Last < f.First {
			return fmt.Sprintf("%s ends before it starts", f.Kind)
		}
	}
	slices.Sort(gk)
	slices.Sort(gr)
	w, r := slices.Clone(want), slices.Clone(resolved)
	slices.Sort(w)
	slices.Sort(r)
	if !slices.Equal(gk, w) || !slices.Equal(gr, r) {
		return fmt.Sprintf("findings %v resolved %v, want %v resolved %v", gk, gr, w, r)
	}
	return ""
}

// A correct application's life, with a burst of records lost somewhere
// (the model told where, as the sources tell it) and an unrelated record
// delivered a minute late (a firmware command that blocked): no certain
// finding; whatever the lost records could have changed is said uncertain,
// and the late record is late, never a new boot.
func TestPropertyHealthyUnderLossAndLateRecords(t *testing.T) {
	runs := 1000
	if testing.Short() {
		runs = 200
	}
	cfg := apm.DefaultConfig()
	for seed := range uint64(runs) {
		b := story(seed, noFault)
		r := rand.New(rand.NewPCG(seed, 0x1055))
		steps := b.Steps
		from := 1 + r.IntN(len(steps)-1)
		to := min(len(steps), from+1+r.IntN(5))
		var got []apm.Finding
		m, err := apm.New(cfg, func(f apm.Finding) { got = append(got, f) })
		if err != nil {
			t.Fatal(err)
		}
		late := &event.Event{Kind: event.KindQPCreate, Boot: steps[0].Boot() + uint64(time.Millisecond), QPN: 7, Device: "mlx5_1", Life: &event.QPLife{QPType: event.QPTypeRC}}
		lateAt := len(steps) / 2
		for i, s := range steps {
			if i == lateAt && s.Boot() > late.Boot+uint64(time.Minute) {
				m.Handle(late)
				late = nil
			}
			if i >= from && i < to {
				continue // lost in the ring buffer
			}
			if i == to {
				m.Lost(steps[from-1].Boot(), s.Boot(), uint64(to-from), 0)
			}
			m.Handle(s.Ev)
		}
		if to == len(steps) {
			m.Lost(steps[from-1].Boot(), 0, uint64(to-from), 0)
		}
		if late != nil {
			m.Handle(late)
		}
		m.Finish(steps[len(steps)-1].Boot() + uint64(settle))
		for _, f := range got {
			if !f.Resolved && f.Uncertain == "" {
				t.Errorf("seed %d (steps %d-%d of %d lost): a certain %s", seed, from, to, len(steps), f.String())
			}
		}
		if s := m.Stats(); s.Reboots != 0 {
			t.Errorf("seed %d: a late record made %d new boots", seed, s.Reboots)
		}
	}
}
