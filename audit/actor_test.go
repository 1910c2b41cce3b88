package audit

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// recordingActor answers each finding with an "actuated" finding.
type recordingActor struct {
	observed, ticks atomic.Int64
	acted           []apm.Finding
}

func (a *recordingActor) Observe(*event.Event) { a.observed.Add(1) }

func (a *recordingActor) Act(_ context.Context, f apm.Finding) []apm.Finding {
	a.acted = append(a.acted, f)
	return []apm.Finding{{Kind: "actuated", Severity: apm.SevInfo, QP: f.QP, Explanation: "rearmed"}}
}

func (a *recordingActor) Tick(context.Context, time.Time) []apm.Finding {
	a.ticks.Add(1)
	return nil
}

func TestActorSeesEventsAndFindings(t *testing.T) {
	act := &recordingActor{}
	h := newHarness(t, func(c *Config) { c.Actor, c.RecorderDir = act, "" })
	d := h.daemon()
	b := h.feedMissedRearm()
	ls := h.lines(2)
	if ls[0].Kind != "missed-rearm" || ls[1].Kind != "actuated" || ls[1].ID == 0 || ls[1].ID == ls[0].ID || ls[1].QP.QPN != 17 {
		t.Fatalf("lines: %+v", ls)
	}
	if got := testutil.ToFloat64(d.m.findings.WithLabelValues("actuated", "info")); got != 1 {
		t.Fatalf("findings_total{actuated} = %v", got)
	}
	if got := testutil.ToFloat64(d.m.openFindings.WithLabelValues("actuated")); got != 0 {
		t.Fatalf("an info finding is open: %v", got)
	}
	// Tick runs on the loop's own clock (20 ms in tests): wait for one
	// rather than assume a busy machine has run it by now.
	for deadline := time.Now().Add(10 * time.Second); act.ticks.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	h.stop()
	if n := act.observed.Load(); n != int64(len(b.Steps)) {
		t.Fatalf("Observe saw %d events of %d", n, len(b.Steps))
	}
	if len(act.acted) != 1 || act.ticks.Load() == 0 {
		t.Fatalf("Act %d times, Tick %d times", len(act.acted), act.ticks.Load())
	}
}

// resolvingActor also takes the model's resolutions.
type resolvingActor struct {
	recordingActor
	resolved []apm.Finding
}

func (a *resolvingActor) Resolve(f apm.Finding) { a.resolved = append(a.resolved, f) }

// An actor that is a Resolver gets the resolution of a finding it was
// given, so it can drop what it scheduled on it.
func TestActorResolverGetsResolutions(t *testing.T) {
	act := &resolvingActor{}
	h := newHarness(t, func(c *Config) { c.Actor, c.RecorderDir = act, "" })
	h.daemon()
	b := h.feedMissedRearm()
	h.lines(2) // missed-rearm, the actor's answer
	from := len(b.Steps)
	b.After(3 * time.Second)
	b.LoadAltRearm(17, apmtest.PathA)
	h.feed(b.Steps[from:])
	h.boot.Store(b.Now() + uint64(3*time.Second))
	ls := h.lines(3) // and the resolution
	h.stop()
	if ls[2].Type != findingline.TypeResolution || ls[2].Resolves != act.acted[0].ID {
		t.Fatalf("lines %+v", ls)
	}
	if len(act.resolved) != 1 || !act.resolved[0].Resolved || act.resolved[0].Resolves != act.acted[0].ID {
		t.Fatalf("resolutions given to the actor: %+v (finding %d)", act.resolved, act.acted[0].ID)
	}
}

// backgroundActor answers each finding from a goroutine of its own, after
// release is closed: a Background actor.
type backgroundActor struct {
	recordingActor
	release chan struct{}
	mu      sync.Mutex
	done    []apm.Finding
	doneC   chan struct{}
	wg      sync.WaitGroup
}

func (a *backgroundActor) Act(_ context.Context, f apm.Finding) []apm.Finding {
	a.acted = append(a.acted, f)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		<-a.release
		a.mu.Lock()
		a.done = append(a.done, apm.Finding{Kind: "actuated", Severity: apm.SevInfo, QP: f.QP, Explanation: "rearmed"})
		a.mu.Unlock()
		a.doneC <- struct{}{}
	}()
	return nil
}

func (a *backgroundActor) Done() <-chan struct{} { return a.doneC }
func (a *backgroundActor) Wait()                 { a.wg.Wait() }
func (a *backgroundActor) Collect() []apm.Finding {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.done
	a.done = nil
	return out
}

// A Background actor's action does not hold the loop: events are judged
// while it runs (the model's finding is written), and its finding is
// written once it is done; one still running at shutdown is waited for.
func TestActorInBackground(t *testing.T) {
	for _, atStop := range []bool{false, true} {
		act := &backgroundActor{release: make(chan struct{}), doneC: make(chan struct{}, 1)}
		h := newHarness(t, func(c *Config) { c.Actor, c.RecorderDir = act, "" })
		h.daemon()
		h.feedMissedRearm()
		if ls := h.lines(1); ls[0].Kind != "missed-rearm" {
			t.Fatalf("lines: %+v", ls)
		}
		if atStop {
			go func() { time.Sleep(50 * time.Millisecond); close(act.release) }()
			h.stop()
			ls := h.lines(2)
			if ls[1].Kind != "actuated" {
				t.Fatalf("at shutdown: %+v", ls)
			}
			continue
		}
		close(act.release)
		ls := h.lines(2)
		h.stop()
		if ls[1].Kind != "actuated" || ls[1].ID == 0 || ls[1].ID == ls[0].ID || ls[1].QP.QPN != 17 {
			t.Fatalf("lines: %+v", ls)
		}
	}
}

// lossActor records what it is told of lost events.
type lossActor struct {
	recordingActor
	lost atomic.Int64
}

func (a *lossActor) Lost(uint64) { a.lost.Add(1) }

// An actor that is a LossTaker is told once each time the source's lost
// counter grows (before it acts on what it planned), and not while it
// stays.
func TestActorLossTakerToldOfLoss(t *testing.T) {
	act := &lossActor{}
	h := newHarness(t, func(c *Config) { c.Actor, c.RecorderDir = act, "" })
	h.daemon()
	time.Sleep(100 * time.Millisecond)
	if n := act.lost.Load(); n != 0 {
		t.Fatalf("told of %d losses before any", n)
	}
	h.src.lost.Store(3)
	for deadline := time.Now().Add(10 * time.Second); act.lost.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // more ticks, the counter unchanged
	h.stop()
	if n := act.lost.Load(); n != 1 {
		t.Fatalf("told of %d losses, want 1", n)
	}
}

// --pprof on a loopback address serves the profiles with a clear warning
// in the log that a local user can read them.
func TestProfilesWarn(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profiles, c.MetricsAddr, c.RecorderDir = true, "127.0.0.1:0", "" })
	h.daemon()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(h.stderr.String(), "serving Go runtime profiles"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no warning for --pprof:\n%s", h.stderr.String())
		}
	}
	h.stop()
	if !strings.Contains(h.stderr.String(), "any local user can read") {
		t.Fatalf("the warning does not say who can read the profiles:\n%s", h.stderr.String())
	}
}
