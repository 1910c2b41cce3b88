package apm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// migratedModel is a model (sink into *out) fed an armed QP's migration
// with nobody rearming; it returns the builder to go on from.
func migratedModel(t *testing.T, out *[]apm.Finding, ids ...*apm.IDs) (*apm.Model, *apmtest.Builder) {
	t.Helper()
	m, err := apm.New(apm.DefaultConfig(), func(f apm.Finding) { *out = append(*out, f) }, ids...)
	if err != nil {
		t.Fatal(err)
	}
	b := apmtest.New()
	armedQP(b)
	b.PathMig(qpn)
	for _, s := range b.Steps {
		m.Handle(s.Ev)
	}
	return m, b
}

// A missed rearm judged in a replay under the replay's own ID, renumbered
// to the ID the earlier run logged: the late rearm's resolution names the
// logged ID, and a fresh ID is never one the earlier run used.
func TestRenumberKeepsResolutionsOnTheLoggedID(t *testing.T) {
	var out []apm.Finding
	ids := &apm.IDs{}
	ids.AtLeast(40) // the earlier run's log went up to 40
	m, b := migratedModel(t, &out, ids)
	m.Advance(b.Now() + uint64(10*time.Second))
	if len(out) != 1 || out[0].Kind != apm.MissedRearm || out[0].ID != 41 {
		t.Fatalf("replay judged %+v, want one missed-rearm with ID 41", out)
	}
	if !m.Renumber(41, 7) {
		t.Fatal("Renumber found no reference to 41")
	}
	if m.Renumber(41, 8) {
		t.Fatal("Renumber changed a reference to 41 twice")
	}
	b.After(15 * time.Second)
	late := b.LoadAltRearm(qpn, apmtest.PathC)
	m.Handle(late)
	m.Finish(b.Now() + uint64(time.Second))
	r := findOne(t, out, apm.MissedRearm, true)
	if r.Resolves != 7 || r.ID != 42 {
		t.Fatalf("resolution %d resolves %d, want 42 resolving the logged 7", r.ID, r.Resolves)
	}
}

// A migration whose rearm deadline passes while apmwatch was not running
// is judged when the clock comes back, and says the records of that time
// are not known.
func TestUnwatchedSpanMakesFindingsUncertain(t *testing.T) {
	var out []apm.Finding
	m, b := migratedModel(t, &out)
	stopped := b.Now() + uint64(500*time.Millisecond)
	m.Advance(stopped)
	if len(out) != 0 {
		t.Fatalf("judged before the deadline: %+v", out)
	}
	back := stopped + uint64(4*time.Second)
	m.Unwatched(stopped, back)
	b.After(time.Duration(back - b.Now()))
	m.Handle(b.Truth(qpn, event.MigMigrated, event.StateRTS))
	m.Advance(back + uint64(3*time.Second))
	f := findOne(t, out, apm.MissedRearm, false)
	if !strings.Contains(f.Uncertain, "apmwatch was not running for 4.0 s") || !strings.Contains(f.Explanation, "uncertain") ||
		len(f.Evidence) < 2 || !strings.Contains(f.Evidence[len(f.Evidence)-1].What, "a reading of MIGRATED after apmwatch was not running") {
		t.Fatalf("missed-rearm across an unwatched span: uncertain %q, explanation %q, evidence %+v", f.Uncertain, f.Explanation, f.Evidence)
	}
}

// A reading after an unwatched span that shows the QP rearmed ends the
// episode as rearmed: the rearm happened while nobody watched, and no
// missed-rearm is raised.
func TestUnwatchedSpanRearmReadNoFinding(t *testing.T) {
	var out []apm.Finding
	m, b := migratedModel(t, &out)
	stopped := b.Now() + uint64(500*time.Millisecond)
	m.Advance(stopped)
	back := stopped + uint64(4*time.Second)
	m.Unwatched(stopped, back)
	b.After(time.Duration(back - b.Now()))
	m.Handle(b.Truth(qpn, event.MigRearm, event.StateRTS))
	m.Finish(back + uint64(10*time.Second))
	for _, f := range out {
		if !f.Resolved && f.Severity >= apm.SevWarning {
			t.Fatalf("finding on a QP read rearmed after the unwatched span: %+v", f)
		}
	}
}

// Deadlines that fell while apmwatch was not running: with no reading
// after, nothing is claimed; a CM notify or an APR of that time is not
// seen, so neither cm-not-notified nor lap-race is raised.
func TestUnwatchedDeadlines(t *testing.T) {
	var out []apm.Finding
	m, err := apm.New(apm.DefaultConfig(), func(f apm.Finding) { out = append(out, f) })
	if err != nil {
		t.Fatal(err)
	}
	b := apmtest.New()
	cmQP(b)
	b.PathMig(qpn)
	for _, s := range b.Steps {
		m.Handle(s.Ev)
	}
	stopped := b.Now() + uint64(100*time.Millisecond)
	m.Advance(stopped)
	m.Unwatched(stopped, stopped+uint64(20*time.Second))
	m.Finish(stopped + uint64(60*time.Second))
	if len(out) != 0 {
		t.Fatalf("findings judged on a time nobody watched: %+v", out)
	}
}
