package apm_test

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
)

// A deadline is judged as soon as a watermark passes it: the reorder
// window is not waited out, and Due names the time to ask for one.
func TestSettleJudgesAtTheDeadline(t *testing.T) {
	cfg := apm.DefaultConfig()
	var got []apm.Finding
	m, err := apm.New(cfg, func(f apm.Finding) { got = append(got, f) })
	if err != nil {
		t.Fatal(err)
	}
	b := apmtest.New()
	armedQP(b)
	mig := b.PathMig(qpn)
	for _, s := range b.Steps {
		m.Handle(s.Ev)
	}
	// The story still waits in the reorder stage: its first input is due.
	if at, ok := m.Due(); !ok || at != b.Steps[0].Ev.Boot {
		t.Fatalf("Due before the mark = %d, %v; want the first input's %d", at, ok, b.Steps[0].Ev.Boot)
	}
	m.Settle(mig.Boot + 1)
	deadline := mig.Boot + uint64(cfg.RearmDeadline)
	if at, ok := m.Due(); !ok || at != deadline {
		t.Fatalf("Due after the PATH_MIG = %d, %v; want its rearm deadline %d", at, ok, deadline)
	}
	// Advance to the deadline judges nothing: the window is held back.
	m.Advance(deadline + 1)
	if len(got) != 0 {
		t.Fatalf("judged inside the reorder window: %v", got)
	}
	m.Settle(deadline) // stamps before the deadline are in, not the deadline's own
	if len(got) != 0 {
		t.Fatalf("judged before a mark passed the deadline: %v", got)
	}
	m.Settle(deadline + 1)
	if len(got) != 1 || got[0].Kind != apm.MissedRearm || got[0].Last != deadline {
		t.Fatalf("after the mark: %v", got)
	}
	if at, ok := m.Due(); ok {
		t.Fatalf("still due at %d", at)
	}
}

// A rearm stamped just before the deadline that is still in the source
// when the clock passes the deadline is not overtaken without a mark; one
// stamped before a mark that arrives after it is counted late.
func TestSettleAndLateInput(t *testing.T) {
	cfg := apm.DefaultConfig()
	var got []apm.Finding
	m, _ := apm.New(cfg, func(f apm.Finding) { got = append(got, f) })
	b := apmtest.New()
	armedQP(b)
	mig := b.PathMig(qpn)
	for _, s := range b.Steps {
		m.Handle(s.Ev)
	}
	deadline := mig.Boot + uint64(cfg.RearmDeadline)
	b.After(cfg.RearmDeadline - time.Millisecond)
	b.LoadAltRearm(qpn, apmtest.PathC)
	rearm := b.Steps[len(b.Steps)-1].Ev
	m.Settle(deadline - 2*uint64(time.Millisecond)) // the mark before the rearm's stamp
	m.Handle(rearm)
	m.Settle(deadline + uint64(time.Millisecond))
	for _, f := range got {
		if f.Kind == apm.MissedRearm {
			t.Fatalf("rearmed in time, judged missed: %v", f)
		}
	}
	if m.Stats().Late != 0 {
		t.Fatalf("late: %d", m.Stats().Late)
	}
	// An input older than a mark is late, judged at its own stamp.
	old := *b.Steps[0].Ev
	m.Handle(&old)
	if m.Stats().Late == 0 {
		t.Fatal("an input older than the mark was not counted late")
	}
}
