package apm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// runWithLoss feeds the steps and tells the model of a loss of n events
// between Boot from and to once the stream reaches to.
func runWithLoss(t *testing.T, steps []apmtest.Step, from, to, n uint64) []apm.Finding {
	t.Helper()
	var out []apm.Finding
	m, err := apm.New(apm.DefaultConfig(), func(f apm.Finding) { out = append(out, f) })
	if err != nil {
		t.Fatal(err)
	}
	told := false
	var last uint64
	for _, s := range steps {
		if !told && n > 0 && s.Boot() >= to {
			m.Lost(from, to, n, 0)
			told = true
		}
		m.Handle(s.Ev)
		last = max(last, s.Boot())
	}
	if !told && n > 0 {
		m.Lost(from, to, n, 0)
	}
	m.Finish(last + uint64(30*time.Second))
	return out
}

func kindsOf(fs []apm.Finding) (open, resolved []string) {
	for _, f := range fs {
		if f.Resolved {
			resolved = append(resolved, string(f.Kind))
		} else {
			open = append(open, string(f.Kind))
		}
	}
	return open, resolved
}

// readsArmed: a migration nobody is seen rearming, then readings of ARMED.
func readsArmed(b *apmtest.Builder) uint64 {
	armedQP(b)
	mig := b.PathMig(qpn).Boot
	for range 5 {
		b.After(time.Second).Truth(qpn, event.MigArmed, event.StateRTS)
	}
	return mig
}

// readsArmedLate: readsArmed whose first reading comes after the rearm
// deadline.
func readsArmedLate(b *apmtest.Builder) uint64 {
	armedQP(b)
	mig := b.PathMig(qpn).Boot
	b.After(2 * time.Second)
	for range 5 {
		b.After(time.Second).Truth(qpn, event.MigArmed, event.StateRTS)
	}
	return mig
}

// readsMigratedAfterRearm: a migration rearmed, then readings of MIGRATED
// with no further PATH_MIG seen.
func readsMigratedAfterRearm(b *apmtest.Builder) uint64 {
	armedQP(b)
	mig := b.PathMig(qpn).Boot
	b.ThreeSteps(qpn, apmtest.PathC, 0)
	b.After(2*time.Second).Truth(qpn, event.MigArmed, event.StateRTS)
	b.After(2*time.Second).Truth(qpn, event.MigMigrated, event.StateRTS)
	b.After(2*time.Second).Truth(qpn, event.MigMigrated, event.StateRTS)
	return mig
}

// The model claims nothing the records it was told are missing could
// change.
func TestFindingsUnderLoss(t *testing.T) {
	sec := int64(time.Second)
	for _, tc := range []struct {
		name           string
		story          func(b *apmtest.Builder) (mig uint64)
		from, to       int64  // relative to the migration
		lost           uint64 // 0: none
		open, resolved string
		uncertain      bool
	}{
		{name: "a missed rearm with a loss earlier in its QP's life says so",
			story: func(b *apmtest.Builder) uint64 {
				armedQP(b)
				return b.After(10 * time.Second).PathMig(qpn).Boot
			},
			from: -9 * sec, to: -8 * sec, lost: 4, open: "missed-rearm", uncertain: true},
		{name: "a missed rearm whose window overlaps a loss says so",
			story: func(b *apmtest.Builder) uint64 { armedQP(b); return b.PathMig(qpn).Boot },
			from:  sec / 2, to: sec, lost: 3, open: "missed-rearm", uncertain: true},
		{name: "a missed rearm of a QP created after a loss is certain",
			story: func(b *apmtest.Builder) uint64 {
				b.After(10 * time.Second)
				armedQP(b)
				return b.PathMig(qpn).Boot
			},
			from: -9 * sec, to: -8 * sec, lost: 4, open: "missed-rearm"},
		{name: "a reading shows the migration rearmed, a loss since it: rearmed unseen, no mismatch, no missed rearm against it",
			story: readsArmed,
			from:  sec / 4, to: sec / 2, lost: 2},
		{name: "the same reading after the rearm deadline: the missed rearm raised before it is resolved, no mismatch",
			story: readsArmedLate,
			from:  sec / 4, to: sec / 2, lost: 2, open: "missed-rearm", resolved: "missed-rearm", uncertain: true},
		{name: "the same reading with nothing lost is a mismatch",
			story: readsArmed,
			open:  "missed-rearm,mig-state-mismatch"},
		{name: "rearmed, then reads MIGRATED with a loss since the rearm: the PATH_MIG may be lost, no mismatch",
			story: readsMigratedAfterRearm,
			from:  3 * sec, to: 4 * sec, lost: 1},
		{name: "the same MIGRATED reading with nothing lost is a mismatch",
			story: readsMigratedAfterRearm,
			open:  "mig-state-mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := apmtest.New()
			mig := tc.story(b)
			got := runWithLoss(t, b.Steps, uint64(int64(mig)+tc.from), uint64(int64(mig)+tc.to), tc.lost)
			checkResolutions(t, got)
			open, resolved := kindsOf(got)
			if strings.Join(open, ",") != tc.open || strings.Join(resolved, ",") != tc.resolved {
				for _, f := range got {
					t.Log(f.String(), f.Explanation)
				}
				t.Fatalf("open %v resolved %v, want %q and %q", open, resolved, tc.open, tc.resolved)
			}
			for _, f := range got {
				if f.Resolved {
					if tc.resolved != "" && !strings.Contains(f.Explanation, "the rearm was not seen: 2 events lost") {
						t.Errorf("resolution %q does not name the loss", f.Explanation)
					}
					continue
				}
				if (f.Uncertain != "") != tc.uncertain || tc.uncertain && !strings.Contains(f.Explanation, "events lost in the QP") {
					t.Errorf("%s: uncertain %q (want %v), explanation %q", f.Kind, f.Uncertain, tc.uncertain, f.Explanation)
				}
			}
		})
	}
}

// Probes the kernel skipped (Stats.Missed) are lost events as the ring's
// are: the model is told of a loss when either counter grows.
func TestLossWatchCountsMissed(t *testing.T) {
	m, err := apm.New(apm.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var w apm.LossWatch
	w.Check(m, event.Stats{At: 100})
	w.Check(m, event.Stats{Missed: 2, At: 200})
	if got := m.Stats().LossSpans; got != 1 {
		t.Fatalf("after 2 missed: %d loss spans, want 1", got)
	}
	w.Check(m, event.Stats{Missed: 2, At: 300})
	w.Check(m, event.Stats{Missed: 2, Lost: 1, At: 400})
	if got := m.Stats().LossSpans; got != 2 {
		t.Fatalf("after 1 more lost: %d loss spans, want 2", got)
	}
}
