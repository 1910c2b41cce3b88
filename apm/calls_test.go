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
