package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
)

// late moves step i of the story to the end of the arrival order, after
// the story's last step (an event of another QP that moves the clock past
// the reorder window).
func late(steps []apmtest.Step, i int) []apmtest.Step {
	out := append([]apmtest.Step(nil), steps[:i]...)
	out = append(out, steps[i+1:]...)
	return append(out, steps[i])
}

// pass moves the clock twice by d with events of other QPs, so that the
// model releases past the story.
func pass(b *apmtest.Builder, d time.Duration) {
	b.After(d).Create(qpn + 1)
	b.After(d).Create(qpn + 2)
}

// An input older than the reorder window is counted late and judged at its
// own stamp, never at "now".
func TestLateInputAtItsOwnStamp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		story  func(b *apmtest.Builder) int // returns the index of the step that arrives late
		want   []apm.Kind
		solved []apm.Kind
	}{
		{"a rearm stamped before the migration does not close it", func(b *apmtest.Builder) int {
			armedQP(b)
			i := len(b.Steps)
			b.Rearm(qpn)
			b.After(time.Millisecond).PathMig(qpn)
			pass(b, 5*time.Second)
			return i
		}, []apm.Kind{apm.MissedRearm}, nil},
		{"a PATH_MIG whose rearm was already applied opens no episode", func(b *apmtest.Builder) int {
			armedQP(b)
			i := len(b.Steps)
			b.PathMig(qpn)
			b.After(time.Millisecond).ThreeSteps(qpn, apmtest.PathC, 0)
			pass(b, 5*time.Second)
			return i
		}, nil, nil},
		{"a late alternate load that was in force at the rearm", func(b *apmtest.Builder) int {
			armedQP(b)
			b.PathMig(qpn)
			i := len(b.Steps)
			b.LoadAlt(qpn, apmtest.PathC)
			b.Rearm(qpn)
			pass(b, 250*time.Millisecond) // late, but within the linger window
			return i
		}, nil, nil},
		{"a late PATH_MIG_ERR keeps its own time", func(b *apmtest.Builder) int {
			armedQP(b)
			i := len(b.Steps)
			b.PathMigErr(qpn)
			pass(b, 5*time.Second)
			return i
		}, []apm.Kind{apm.MigrationError}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := apmtest.New()
			i := tc.story(b)
			lateEv := b.Steps[i].Ev
			got, m, err := apmtest.Run(apm.DefaultConfig(), late(b.Steps, i), settle)
			if err != nil {
				t.Fatal(err)
			}
			checkKinds(t, got, tc.want, tc.solved)
			if m.Stats().Late == 0 {
				t.Error("the late input was not counted")
			}
			for _, f := range got {
				for _, e := range f.Evidence {
					if e.Seq == lateEv.Seq && f.First > lateEv.Boot {
						t.Errorf("%s judged the late input at %d, after its stamp %d", f.Kind, f.First, lateEv.Boot)
					}
				}
			}
		})
	}
}

// A source clock that restarts (a new boot) starts the model afresh: the old
// boot's QPs are gone and nothing of them is judged against the new clock.
func TestNewBootStartsAfresh(t *testing.T) {
	t.Run("the source's boot identity changed", func(t *testing.T) {
		b := apmtest.New()
		b.After(time.Hour)
		armedQP(b)
		b.PathMig(qpn) // would be a missed-rearm had the host not rebooted
		old := len(b.Steps)
		b2 := apmtest.New() // the new boot: CLOCK_BOOTTIME from about zero
		armedQP(b2)
		b2.PathMig(qpn)
		b2.After(time.Millisecond).ThreeSteps(qpn, apmtest.PathC, 0)
		var got []apm.Finding
		m, err := apm.New(apm.DefaultConfig(), func(f apm.Finding) { got = append(got, f) })
		if err != nil {
			t.Fatal(err)
		}
		apmtest.Feed(m, b.Steps[:old])
		m.NewBoot()
		apmtest.Feed(m, b2.Steps)
		m.Finish(b2.Now() + uint64(time.Minute))
		s := m.Stats()
		if s.Reboots != 1 || s.QPs != 1 || s.Late != 0 {
			t.Errorf("stats %+v: want one reboot, the new boot's QP only, nothing late", s)
		}
		for _, f := range got {
			if f.Kind != apm.MissedRearm || f.First < uint64(time.Hour) {
				t.Errorf("finding of the new boot, or judged on the wrong clock: %s", f.String())
			}
		}
	})
	t.Run("a record far behind the clock is late, not a new boot", func(t *testing.T) {
		b := apmtest.New()
		b.After(time.Hour)
		armedQP(b)
		steps := b.Steps
		late := apmtest.New() // a firmware command blocked 60 s: its record, stamped at entry, comes last
		late.After(time.Hour + 500*time.Millisecond)
		late.Create(qpn + 1)
		n := len(steps)
		b.After(60 * time.Second).Create(qpn + 2)
		b.After(10 * time.Second).Create(qpn + 3) // releases the one before
		m, err := apm.New(apm.DefaultConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		apmtest.Feed(m, append(b.Steps[:n+2:n+2], late.Steps[0]))
		m.Finish(b.Now() + uint64(time.Second))
		if s := m.Stats(); s.Reboots != 0 || s.Late != 1 || s.QPs != 4 {
			t.Errorf("stats %+v: want no reboot, one late record, every QP kept", s)
		}
	})
	t.Run("the source clock goes back", func(t *testing.T) {
		m, err := apm.New(apm.DefaultConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		b := apmtest.New()
		b.After(time.Hour)
		armedQP(b)
		apmtest.Feed(m, b.Steps)
		m.Advance(b.Now() + uint64(time.Second))
		m.Advance(uint64(time.Second))
		if s := m.Stats(); s.Reboots != 1 || s.QPs != 0 {
			t.Errorf("stats %+v: want one reboot and no QP", s)
		}
	})
}
