package apm_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// slowCall makes the modify record rec a call that returned d after its
// entry: its announcement (event.KindModifyEntry, the same stamp) is
// inserted where rec was, and rec itself arrives after every step stamped
// before entry+d. announce false: no announcement (an older recorder).
func slowCall(steps []apmtest.Step, rec *event.Event, d time.Duration, announce bool) []apmtest.Step {
	i := slices.IndexFunc(steps, func(s apmtest.Step) bool { return s.Ev == rec })
	out := slices.Clone(steps[:i])
	if announce {
		md := *rec.Modify
		md.Primary, md.Alt, md.Ret = nil, nil, 0
		ent := *rec
		ent.Kind, ent.Modify = event.KindModifyEntry, &md
		out = append(out, apmtest.Step{Ev: &ent})
	}
	if announce {
		rec.Modify.Took = d
	}
	rest := steps[i+1:]
	j := slices.IndexFunc(rest, func(s apmtest.Step) bool { return s.Ev.Boot >= rec.Boot+uint64(d) })
	if j < 0 {
		j = len(rest)
	}
	out = append(out, rest[:j]...)
	out = append(out, apmtest.Step{Ev: rec})
	return append(out, rest[j:]...)
}

// A call that entered before a deadline and returned after it is judged by
// its entry: never "not rearmed within 2s" and "rearmed after 1.5s" about
// the same call.
func TestRearmJudgedByEntry(t *testing.T) {
	const tick = 500 * time.Millisecond
	// clock moves the model's clock (other QPs' records) to at least until
	// after the migration, in steps shorter than any deadline.
	clock := func(b *apmtest.Builder, until time.Duration, mig uint64) {
		for b.Now() < mig+uint64(until) {
			b.After(tick).Create(qpn + 1 + uint32(b.Now()/uint64(tick))%1000)
		}
	}
	for _, tc := range []struct {
		name     string
		story    func(b *apmtest.Builder) (slow *event.Event, took time.Duration)
		announce bool
		want     []apm.Kind
		resolved []apm.Kind
		check    func(t *testing.T, got []apm.Finding)
	}{
		{"a rearm entered before the deadline, returned after it", func(b *apmtest.Builder) (*event.Event, time.Duration) {
			armedQP(b)
			mig := b.PathMig(qpn).Boot
			b.After(1400*time.Millisecond).LoadAlt(qpn, apmtest.PathC)
			r := b.After(100 * time.Millisecond).Rearm(qpn)
			clock(b, 5*time.Second, mig)
			return r, 1500 * time.Millisecond
		}, true, nil, nil, nil},
		{"a rearm entered after the deadline is late, however fast", func(b *apmtest.Builder) (*event.Event, time.Duration) {
			armedQP(b)
			mig := b.PathMig(qpn).Boot
			b.After(2500*time.Millisecond).LoadAlt(qpn, apmtest.PathC)
			r := b.After(time.Millisecond).Rearm(qpn)
			clock(b, 6*time.Second, mig)
			return r, 1200 * time.Millisecond
		}, true, []apm.Kind{apm.MissedRearm}, []apm.Kind{apm.MissedRearm}, nil},
		{"a rearm entered in time and refused at its return", func(b *apmtest.Builder) (*event.Event, time.Duration) {
			armedQP(b)
			mig := b.PathMig(qpn).Boot
			b.After(1400*time.Millisecond).LoadAlt(qpn, apmtest.PathC)
			r := apmtest.Fail(b.After(100*time.Millisecond).Rearm(qpn), 5 /* EIO */)
			clock(b, 6*time.Second, mig)
			return r, 2 * time.Second
		}, true, []apm.Kind{apm.MissedRearm, apm.APMModifyFailed}, nil, func(t *testing.T, got []apm.Finding) {
			for _, f := range got {
				if f.Kind == apm.MissedRearm && f.Last < f.First+uint64(2*time.Second) {
					t.Errorf("missed-rearm judged at %d, before its deadline", f.Last)
				}
			}
		}},
		{"a rearm call that never returns", func(b *apmtest.Builder) (*event.Event, time.Duration) {
			armedQP(b)
			mig := b.PathMig(qpn).Boot
			b.After(1400*time.Millisecond).LoadAlt(qpn, apmtest.PathC)
			r := b.After(100 * time.Millisecond).Rearm(qpn)
			clock(b, 90*time.Second, mig)
			return r, time.Hour
		}, true, []apm.Kind{apm.MissedRearm}, []apm.Kind{apm.MissedRearm}, func(t *testing.T, got []apm.Finding) {
			f := findOne(t, got, apm.MissedRearm, false)
			named := false
			for _, e := range f.Evidence {
				named = named || strings.Contains(e.What, "modify call entered")
			}
			if !named {
				t.Errorf("the finding does not name the call in progress: %+v", f.Evidence)
			}
			if f.Last < f.First+uint64(60*time.Second) {
				t.Errorf("judged %v after the migration, before the call's wait ended", time.Duration(f.Last-f.First))
			}
		}},
		{"no announcement: the late record resolves the finding, saying it was in time", func(b *apmtest.Builder) (*event.Event, time.Duration) {
			armedQP(b)
			mig := b.PathMig(qpn).Boot
			b.After(1400*time.Millisecond).LoadAlt(qpn, apmtest.PathC)
			r := b.After(100 * time.Millisecond).Rearm(qpn)
			clock(b, 5*time.Second, mig)
			return r, 1500 * time.Millisecond
		}, false, []apm.Kind{apm.MissedRearm}, []apm.Kind{apm.MissedRearm}, func(t *testing.T, got []apm.Finding) {
			if f := findOne(t, got, apm.MissedRearm, true); !strings.Contains(f.Explanation, "in time after all") {
				t.Errorf("resolution %q does not say the rearm was in time", f.Explanation)
			}
		}},
		{"an alternate load entered before the linger ends holds rearm-without-new-alternate", func(b *apmtest.Builder) (*event.Event, time.Duration) {
			armedQP(b)
			mig := b.PathMig(qpn).Boot
			l := b.After(100*time.Millisecond).LoadAlt(qpn, apmtest.PathC)
			l.TID++ // another thread of the owner
			b.After(100 * time.Millisecond).Rearm(qpn)
			clock(b, 6*time.Second, mig)
			return l, 3 * time.Second
		}, true, nil, nil, nil},
		{"a MIGRATED reading taken while the rearm call ran", func(b *apmtest.Builder) (*event.Event, time.Duration) {
			armedQP(b)
			mig := b.PathMig(qpn).Boot
			b.After(1400*time.Millisecond).LoadAlt(qpn, apmtest.PathC)
			r := b.After(100 * time.Millisecond).Rearm(qpn)
			b.After(600 * time.Millisecond).Create(qpn + 7)
			b.After(600*time.Millisecond).Truth(qpn, event.MigMigrated, event.StateRTS)
			b.After(time.Second).Truth(qpn, event.MigArmed, event.StateRTS)
			clock(b, 6*time.Second, mig)
			return r, 1500 * time.Millisecond
		}, true, nil, nil, nil},
		{"an ARMED reading taken while the rearm call ran, its record later than the grace", func(b *apmtest.Builder) (*event.Event, time.Duration) {
			armedQP(b)
			mig := b.PathMig(qpn).Boot
			b.After(1400*time.Millisecond).LoadAlt(qpn, apmtest.PathC)
			r := b.After(100 * time.Millisecond).Rearm(qpn)
			b.After(100*time.Millisecond).Truth(qpn, event.MigArmed, event.StateRTS)
			clock(b, 8*time.Second, mig)
			return r, 3 * time.Second
		}, true, nil, nil, nil},
		{"a first rearm entered before the arm deadline", func(b *apmtest.Builder) (*event.Event, time.Duration) {
			b.Connect(qpn, apmtest.PathA, nil)
			load := b.After(10*time.Millisecond).LoadAlt(qpn, apmtest.PathB)
			r := b.After(1900 * time.Millisecond).Rearm(qpn)
			clock(b, 6*time.Second, load.Boot)
			return r, 2 * time.Second
		}, true, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := apmtest.New()
			slow, took := tc.story(b)
			got, m, err := apmtest.Run(apm.DefaultConfig(), slowCall(b.Steps, slow, took, tc.announce), settle)
			if err != nil {
				t.Fatal(err)
			}
			checkKinds(t, got, tc.want, tc.resolved)
			if tc.check != nil {
				tc.check(t, got)
			}
			if took < time.Hour && m.Stats().Late == 0 {
				t.Error("the slow call's record was not late: the story does not test what it says")
			}
		})
	}
}

// enter announces a modify call of qpn at the builder's clock
// (event.KindModifyEntry); its record, when the story has one, is built
// with returnOf.
func enter(b *apmtest.Builder, mask uint32, mig event.MigState) *event.Event {
	return b.Add(&event.Event{Kind: event.KindModifyEntry, QPN: qpn, Modify: &event.Modify{QPType: event.QPTypeRC,
		Origin: event.OriginUser, AttrMask: mask, MigState: mig, Hook: "ib_modify_qp_with_udata"}})
}

// returnOf is the successful record of the call entry announced, stamped
// at its entry (as the probes stamp it), with alt loaded when it names
// ALT_PATH; it arrives wherever the story appends it.
func returnOf(b *apmtest.Builder, entry *event.Event, alt event.Path) *event.Event {
	md := *entry.Modify
	if md.Has(event.AttrAltPath) {
		md.Alt = &alt
	}
	rec := &event.Event{Kind: event.KindModify, Seq: entry.Seq, Boot: entry.Boot, Time: entry.Time, PID: entry.PID, TID: entry.TID,
		Comm: entry.Comm, Device: entry.Device, QPN: entry.QPN, Modify: &md}
	b.Steps = append(b.Steps, apmtest.Step{Ev: rec})
	return rec
}

// runJudged runs the steps, telling the model of a loss of lost events
// over [from, to] before the first step stamped at or after to, and
// returns the findings with the model time each was judged at.
func runJudged(t *testing.T, steps []apmtest.Step, from, to, lost uint64) ([]apm.Finding, []uint64) {
	t.Helper()
	var (
		got    []apm.Finding
		judged []uint64
		m      *apm.Model
	)
	m, err := apm.New(apm.DefaultConfig(), func(f apm.Finding) {
		if f.JudgedAt != m.Now() {
			t.Errorf("%s judged_at %d, model time %d", f.Kind, f.JudgedAt, m.Now())
		}
		got, judged = append(got, f), append(judged, m.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	told := lost == 0
	var last uint64
	for _, s := range steps {
		if !told && s.Boot() >= to {
			m.Lost(from, to, lost, 0)
			told = true
		}
		m.Handle(s.Ev)
		last = max(last, s.Boot())
	}
	if !told {
		m.Lost(from, to, lost, 0)
	}
	m.Finish(last + uint64(settle))
	return got, judged
}

// A reading whose dump began after a call's entry and shows the call's
// effect is the call's result: it ends the wait, whatever became of the
// call's record, and no finding is raised against it.
func TestReadingEndsCallInFlight(t *testing.T) {
	const sec = uint64(time.Second)
	altRearm := event.AttrAltPath | event.AttrPathMigState
	readEvery := func(b *apmtest.Builder, from time.Duration, n int, mig ...event.MigState) {
		b.After(from)
		for i := range n {
			b.After(time.Second).Truth(qpn, mig[min(i, len(mig)-1)], event.StateRTS)
		}
	}
	for _, tc := range []struct {
		name     string
		story    func(b *apmtest.Builder) (mig uint64)
		lost     uint64 // events lost over [mig, mig+90 s]
		want     []apm.Kind
		resolved []apm.Kind
		check    func(t *testing.T, mig uint64, got []apm.Finding, judged []uint64)
	}{
		{name: "ALT_PATH|REARM entered 15 ms after PATH_MIG, its return never recorded, netlink reads REARM then ARMED",
			story: func(b *apmtest.Builder) uint64 {
				armedQP(b)
				mig := b.PathMig(qpn).Boot
				b.After(15 * time.Millisecond)
				enter(b, altRearm, event.MigRearm)
				readEvery(b, 0, 90, event.MigRearm, event.MigArmed)
				return mig
			}},
		{name: "the same call's record lost to a counted ring overflow, netlink reads ARMED from 30.5 s",
			story: func(b *apmtest.Builder) uint64 {
				armedQP(b)
				mig := b.PathMig(qpn).Boot
				b.After(15 * time.Millisecond)
				enter(b, altRearm, event.MigRearm)
				readEvery(b, 29500*time.Millisecond, 60, event.MigArmed)
				return mig
			}, lost: 3},
		{name: "the call's record comes 40 s late, after the readings showed it",
			story: func(b *apmtest.Builder) uint64 {
				armedQP(b)
				mig := b.PathMig(qpn).Boot
				b.After(15 * time.Millisecond)
				e := enter(b, altRearm, event.MigRearm)
				readEvery(b, 0, 40, event.MigRearm, event.MigArmed)
				returnOf(b, e, apmtest.PathC)
				readEvery(b, 0, 5, event.MigArmed)
				return mig
			}},
		{name: "a bare rearm after an alternate load, its record lost, reads ARMED",
			story: func(b *apmtest.Builder) uint64 {
				armedQP(b)
				mig := b.PathMig(qpn).Boot
				b.After(10*time.Millisecond).LoadAlt(qpn, apmtest.PathC)
				b.After(5 * time.Millisecond)
				enter(b, event.AttrPathMigState, event.MigRearm)
				readEvery(b, 0, 20, event.MigArmed)
				return mig
			}},
		{name: "a reading begun before the entry shows REARM, the later ones ARMED: the call's result, no mismatch",
			story: func(b *apmtest.Builder) uint64 {
				armedQP(b)
				mig := b.PathMig(qpn).Boot
				b.After(15 * time.Millisecond)
				enter(b, altRearm, event.MigRearm)
				b.After(10*time.Millisecond).Truth(qpn, event.MigRearm, event.StateRTS).Truth.Span = uint64(20 * time.Millisecond)
				readEvery(b, 0, 20, event.MigArmed)
				return mig
			}},
		{name: "the readings still show MIGRATED: the call holds the deadline to its wait, then missed-rearm names it",
			story: func(b *apmtest.Builder) uint64 {
				armedQP(b)
				mig := b.PathMig(qpn).Boot
				b.After(15 * time.Millisecond)
				enter(b, altRearm, event.MigRearm)
				readEvery(b, 0, 90, event.MigMigrated)
				return mig
			}, want: []apm.Kind{apm.MissedRearm},
			check: func(t *testing.T, mig uint64, got []apm.Finding, judged []uint64) {
				if judged[0] < mig+61*sec {
					t.Errorf("missed-rearm judged %v after the migration, before the call's wait ended", time.Duration(judged[0]-mig))
				}
			}},
		{name: "a bare rearm with no load in the episode, its record lost, reads ARMED: the rearm is known, and bare",
			story: func(b *apmtest.Builder) uint64 {
				armedQP(b)
				mig := b.PathMig(qpn).Boot
				b.After(15 * time.Millisecond)
				enter(b, event.AttrPathMigState, event.MigRearm)
				readEvery(b, 0, 20, event.MigArmed)
				return mig
			}, want: []apm.Kind{apm.RearmWithoutAlt}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := apmtest.New()
			mig := tc.story(b)
			got, judged := runJudged(t, b.Steps, mig, mig+90*sec, tc.lost)
			checkKinds(t, got, tc.want, tc.resolved)
			if tc.check != nil && len(got) > 0 {
				tc.check(t, mig, got, judged)
			}
		})
	}
}

// Only a call that can rearm holds a rearm deadline: an alternate load
// that hangs (no PATH_MIG_STATE) does not delay missed-rearm.
func TestOnlyRearmsHoldTheRearmDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		mask uint32
		mig  event.MigState
		hold bool // the deadline waits for the call
	}{
		{"an ALT_PATH-only load hangs for 60 s", event.AttrAltPath, 0, false},
		{"a PATH_MIG_STATE=MIGRATED call hangs for 60 s", event.AttrPathMigState, event.MigMigrated, false},
		{"an ALT_PATH|REARM call hangs for 60 s", event.AttrAltPath | event.AttrPathMigState, event.MigRearm, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := apmtest.New()
			armedQP(b)
			mig := b.PathMig(qpn).Boot
			b.After(100 * time.Millisecond)
			e := enter(b, tc.mask, tc.mig)
			for range 60 {
				b.After(time.Second).Create(qpn + 1 + uint32(b.Now()/uint64(time.Second))%1000)
			}
			rec := returnOf(b, e, apmtest.PathC)
			rec.Modify.Ret = -5 // refused: nothing it set closes the episode
			got, judged := runJudged(t, b.Steps, 0, 0, 0)
			var at uint64
			for i, f := range got {
				if f.Kind == apm.MissedRearm && !f.Resolved {
					at = judged[i]
				}
			}
			if at == 0 {
				t.Fatalf("no missed-rearm: %v", got)
			}
			dl := mig + uint64(apm.DefaultConfig().RearmDeadline)
			late := at - dl
			// held: judged when the call returns, 60 s after its entry;
			// not held: at the deadline itself
			if tc.hold && late < uint64(55*time.Second) || !tc.hold && late > uint64(apm.DefaultConfig().ReorderWindow) {
				t.Errorf("missed-rearm judged %v after its deadline (hold %v)", time.Duration(late), tc.hold)
			}
		})
	}
}
