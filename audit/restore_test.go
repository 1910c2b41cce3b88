package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// runIn starts the daemon on dir's files, on boot bootID, with rdma
// netlink listing qps, its clock at boot.
func runIn(t *testing.T, dir, bootID string, boot uint64, qps ...rdmanl.QP) *harness {
	t.Helper()
	h := newHarnessIn(t, dir, nil, 20*time.Millisecond, func(h *harness, d *Deps) {
		h.src.meta.BootID = bootID
		h.src.meta.BootOffset = time.Duration(time.Now().UnixNano() - int64(boot)) // the boot began boot ago
		h.src.at = h.boot.Load
		d.BootID = func() string { return bootID }
		h.boot.Store(boot)
		h.qps.Store(&qps)
	})
	h.daemon()
	return h
}

// qpRead is rxe0's QP qpn as rdma netlink lists it, owned by apmtest's
// process (pid 4242) unless pid says otherwise.
func qpRead(qpn uint32, mig event.MigState, pid uint32) rdmanl.QP {
	return rdmanl.QP{Device: "rxe0", LQPN: qpn, Type: event.QPTypeRC, State: event.StateRTS, PathMig: mig, HasPathMig: true, PID: pid, Comm: "apmapp"}
}

// feedMissed is feedMissedRearm with the events' wall clock the host's
// (the boot began the harness clock's reading ago).
func feedMissed(h *harness) *apmtest.Builder {
	b := apmtest.New()
	b.Device = "rxe0"
	b.Start = time.Now().Add(-time.Duration(h.boot.Load()))
	missedRearm(b)
	h.feed(b.Steps)
	h.boot.Store(b.Now() + uint64(3*time.Second))
	return b
}

// openGauge is open_findings{kind}.
func openGauge(h *harness, k apm.Kind) float64 {
	return testutil.ToFloat64(h.daemon().m.openFindings.WithLabelValues(string(k)))
}

// waitLog waits for the daemon's log to say s.
func waitLog(t *testing.T, h *harness, s string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(h.stderr.String(), s); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's log never said %q:\n%s", s, h.stderr.String())
		}
	}
}

// A missed rearm judged before a restart stays open after it: the same
// ID, no second line, the gauge up; the late rearm resolves the logged ID.
func TestRestartKeepsAnOpenMissedRearm(t *testing.T) {
	dir := t.TempDir()
	h := runIn(t, dir, "boot-A", uint64(time.Second))
	b := feedMissed(h)
	f := h.lines(1)[0]
	if f.Kind != string(apm.MissedRearm) {
		t.Fatalf("first run: %+v", f)
	}
	h.stop()

	h2 := runIn(t, dir, "boot-A", b.Now()+uint64(10*time.Second), qpRead(17, event.MigMigrated, 4242))
	waitLog(t, h2, "restored from the flight recorder")
	time.Sleep(200 * time.Millisecond)
	if ls := readLines(t, h2.cfg.Findings); len(ls) != 1 {
		t.Fatalf("after the restart: %+v, want only the first run's line", ls)
	}
	if g := openGauge(h2, apm.MissedRearm); g != 1 {
		t.Fatalf("open_findings{missed-rearm} after the restart = %v, want 1\nlog:\n%s", g, h2.stderr.String())
	}
	if _, ok := h2.daemon().open[f.ID]; !ok {
		t.Fatalf("finding %d not open under its ID after the restart", f.ID)
	}
	b.After(12 * time.Second)
	h2.feed([]apmtest.Step{{Ev: b.LoadAltRearm(17, apmtest.PathC)}})
	h2.boot.Store(b.Now() + uint64(2*time.Second))
	ls := h2.lines(2)
	if r := ls[1]; !r.Resolved || r.Resolves != f.ID || r.ID <= f.ID {
		t.Fatalf("resolution after the restart: %+v, want one resolving %d with a new ID", r, f.ID)
	}
	h2.stop()
}

// A restart before the rearm deadline: the deadline passes while nobody
// watches. A reading of MIGRATED after the start gives the missed rearm,
// saying apmwatch was not running; a reading of REARM gives none.
func TestRestartBeforeTheDeadline(t *testing.T) {
	for _, c := range []struct {
		mig  event.MigState
		want int
	}{{event.MigMigrated, 1}, {event.MigRearm, 0}} {
		t.Run(c.mig.String(), func(t *testing.T) {
			dir := t.TempDir()
			h := runIn(t, dir, "boot-A", uint64(time.Second))
			b := apmtest.New()
			b.Device = "rxe0"
			missedRearm(b)
			h.feed(b.Steps)
			h.boot.Store(b.Now() + uint64(500*time.Millisecond))
			time.Sleep(200 * time.Millisecond)
			h.stop()
			if ls := readLines(t, h.cfg.Findings); len(ls) != 0 {
				t.Fatalf("first run, before the deadline: %+v", ls)
			}
			h2 := runIn(t, dir, "boot-A", b.Now()+uint64(5*time.Second), qpRead(17, c.mig, 4242))
			waitLog(t, h2, "restored from the flight recorder")
			h2.boot.Store(b.Now() + uint64(9*time.Second))
			time.Sleep(300 * time.Millisecond)
			ls := readLines(t, h2.cfg.Findings)
			if len(ls) != c.want {
				t.Fatalf("after a restart with the QP reading %s: %+v, want %d line(s)\nlog:\n%s", c.mig, ls, c.want, h2.stderr.String())
			}
			if c.want == 1 {
				b, _ := os.ReadFile(h2.cfg.Findings)
				if ls[0].Kind != string(apm.MissedRearm) || !strings.Contains(string(b), "apmwatch was not running") {
					t.Fatalf("the missed rearm does not say apmwatch was not running: %s", b)
				}
			}
			h2.stop()
		})
	}
}

// The QP's number now belongs to another process (the QP was destroyed
// and the number given again while nobody watched): nothing stays open.
func TestRestartQPNOfAnotherOwner(t *testing.T) {
	dir := t.TempDir()
	h := runIn(t, dir, "boot-A", uint64(time.Second))
	b := feedMissed(h)
	h.lines(1)
	h.stop()
	h2 := runIn(t, dir, "boot-A", b.Now()+uint64(10*time.Second), qpRead(17, event.MigArmed, 777))
	waitLog(t, h2, "restored from the flight recorder")
	time.Sleep(200 * time.Millisecond)
	if g := openGauge(h2, apm.MissedRearm); g != 0 {
		t.Fatalf("open_findings{missed-rearm} = %v on a QPN another process owns now", g)
	}
	if ls := readLines(t, h2.cfg.Findings); len(ls) != 1 {
		t.Fatalf("lines after the restart: %+v", ls)
	}
	h2.stop()
}

// The flight recorder no longer holds the migration (its budget is
// minutes): the finding log's open missed rearm is given back to the
// model while rdma netlink lists the QP under its owner, and a reading
// of REARM later resolves it.
func TestRestartFromTheFindingLogAlone(t *testing.T) {
	dir := t.TempDir()
	h := runIn(t, dir, "boot-A", uint64(time.Second))
	b := feedMissed(h)
	f := h.lines(1)[0]
	h.stop()
	files, _ := filepath.Glob(filepath.Join(dir, "rec", flightPrefix+"*"))
	for _, p := range files {
		os.Remove(p)
	}
	h2 := runIn(t, dir, "boot-A", b.Now()+uint64(10*time.Second), qpRead(17, event.MigMigrated, 4242))
	waitLog(t, h2, "restored from the flight recorder")
	if g := openGauge(h2, apm.MissedRearm); g != 1 {
		t.Fatalf("open_findings{missed-rearm} = %v, want 1\nlog:\n%s", g, h2.stderr.String())
	}
	// the application rearms; the next reading shows it
	h2.src.ch <- &event.Event{Kind: event.KindTruth, Boot: b.Now() + uint64(11*time.Second), Device: "rxe0", QPN: 17, PID: 4242,
		Truth: &event.Truth{Op: event.TruthRead, Source: "netlink", QPType: event.QPTypeRC, State: event.StateRTS, HasState: true,
			Mig: event.MigRearm, Span: 1}}
	h2.boot.Store(b.Now() + uint64(14*time.Second))
	ls := h2.lines(2)
	if r := ls[1]; !r.Resolved || r.Resolves != f.ID {
		t.Fatalf("after a reading of REARM: %+v, want a resolution of %d", r, f.ID)
	}
	h2.stop()
}

// Another boot's records are not replayed: its QPs died with it.
func TestRestartAfterAReboot(t *testing.T) {
	dir := t.TempDir()
	h := runIn(t, dir, "boot-A", uint64(time.Second))
	feedMissed(h)
	h.lines(1)
	h.stop()
	// the host booted again a millisecond ago; the new QP 17 has the old
	// one's owner's pid by chance
	h2 := runIn(t, dir, "boot-B", uint64(time.Millisecond), qpRead(17, event.MigMigrated, 4242))
	time.Sleep(200 * time.Millisecond)
	if g := openGauge(h2, apm.MissedRearm); g != 0 {
		t.Fatalf("open_findings{missed-rearm} = %v after a reboot", g)
	}
	h2.stop()
}
