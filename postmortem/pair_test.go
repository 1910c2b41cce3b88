package postmortem

import (
	"strings"
	"testing"
	"time"
)

func TestOneSidedRearm(t *testing.T) {
	pa, pb := twoHosts(t, true, false, 0, 10, 10)
	r := run(t, Options{}, pa, pb)
	if len(r.Pairs) != 1 || r.Pairs[0].A != "host-a/mlx5_0/100#1" || r.Pairs[0].B != "host-b/mlx5_0/200#1" {
		t.Fatalf("pairs: %+v", r.Pairs)
	}
	k := kinds(r)
	if k["one-sided-rearm@host-b"] != 1 || k["one-sided-rearm@host-a"] != 0 {
		t.Fatalf("want one one-sided-rearm on host-b: %v", k)
	}
	if k["missed-rearm@host-b"] != 1 || k["missed-rearm@host-a"] != 0 {
		t.Fatalf("the model's missed-rearm on host-b only: %v", k)
	}
	ep := r.Pairs[0].Episodes
	if len(ep) != 1 || !strings.HasPrefix(ep[0].Verdict, "one-sided: host-a mlx5_0/100 rearmed") || ep[0].RearmedB != nil || ep[0].MigratedB == nil {
		t.Fatalf("episode: %+v", ep)
	}
	ids := map[uint64]bool{}
	for _, f := range r.Findings {
		if f.Kind == OneSidedRearm && (f.QP.QPN != 200 || len(f.Evidence) != 3) {
			t.Fatalf("one-sided-rearm finding: %+v", f)
		}
		if f.ID == 0 || ids[f.ID] {
			t.Fatalf("finding ID %d is zero or not unique across the report: %+v", f.ID, f)
		}
		ids[f.ID] = true
	}
}

func TestBothRearmedIsNotOneSided(t *testing.T) {
	pa, pb := twoHosts(t, true, true, 0, 10, 10)
	r := run(t, Options{}, pa, pb)
	if n := r.Summary.Findings[string(OneSidedRearm)]; n != 0 {
		t.Fatalf("%d one-sided-rearm findings for a connection both sides rearmed", n)
	}
	if len(r.Pairs) != 1 || r.Pairs[0].Episodes[0].Verdict != "both rearmed" {
		t.Fatalf("pairs: %+v", r.Pairs)
	}
}

func TestNeitherRearmedIsNotOneSided(t *testing.T) {
	pa, pb := twoHosts(t, false, false, 0, 10, 10)
	r := run(t, Options{}, pa, pb)
	k := kinds(r)
	if k["one-sided-rearm@host-a"]+k["one-sided-rearm@host-b"] != 0 || k["missed-rearm@host-a"] != 1 || k["missed-rearm@host-b"] != 1 {
		t.Fatalf("want missed-rearm on both sides and no one-sided-rearm: %v", k)
	}
}

// A recording that stops before the peer's deadline cannot tell.
func TestOneSidedUndecidedWhenRecordingEnds(t *testing.T) {
	pa, pb := twoHosts(t, true, false, 0, 10, 2.5)
	r := run(t, Options{}, pa, pb)
	if n := r.Summary.Findings[string(OneSidedRearm)]; n != 0 {
		t.Fatalf("one-sided-rearm from a recording that ended before the deadline")
	}
	if v := r.Pairs[0].Episodes[0].Verdict; !strings.HasPrefix(v, "undecided") {
		t.Fatalf("verdict %q", v)
	}
}

// Without a peer recording there is no pair and no pairing finding.
func TestOneRecordingNoPair(t *testing.T) {
	pa, _ := twoHosts(t, true, false, 0, 10, 10)
	r := run(t, Options{}, pa)
	if len(r.Pairs) != 0 || r.Summary.Findings[string(OneSidedRearm)] != 0 {
		t.Fatalf("pairs %+v findings %v", r.Pairs, r.Summary.Findings)
	}
}

func TestLAPRoute(t *testing.T) {
	pa, pb := twoHosts(t, true, true, 0, 10, 10)
	r := run(t, Options{}, pa, pb)
	laps := r.Pairs[0].LAPs
	if len(laps) != 1 || laps[0].From != "host-a mlx5_0/100" || laps[0].Received == nil ||
		laps[0].Received.Sub(*laps[0].Sent) != 299*time.Microsecond {
		t.Fatalf("LAP route: %+v", laps)
	}
}

// host-b's wall clock runs 50 ms ahead. The LAP (a->b) and the APR (b->a)
// bound b-a to [50ms-2.3ms... ] and the timeline is shifted back.
func TestClockBoundsAndShift(t *testing.T) {
	pa, pb := twoHosts(t, true, true, 50*time.Millisecond, 10, 10)
	r := run(t, Options{}, pa, pb)
	if len(r.Clocks) != 1 {
		t.Fatalf("clocks: %+v", r.Clocks)
	}
	c := r.Clocks[0]
	if c.Method != "wall" || c.Exchanges != 2 || c.Lo == nil || c.Hi == nil {
		t.Fatalf("clock: %+v", c)
	}
	// a sent the LAP at A, b got it 299us later (b's clock +50ms): hi = 50.299ms.
	// b sent the APR 100us after, a got it 2ms after the LAP left: lo = 50.4-2 = 48.4ms.
	if *c.Hi != 50299*time.Microsecond || *c.Lo != 48400*time.Microsecond {
		t.Fatalf("bounds [%v, %v], want [48.4ms, 50.299ms]", *c.Lo, *c.Hi)
	}
	if c.Shift != -48400*time.Microsecond {
		t.Fatalf("shift %v, want -48.4ms (the least that satisfies the bounds)", c.Shift)
	}
	// after the shift the LAP arrives after it left
	l := r.Pairs[0].LAPs[0]
	if !l.Received.After(*l.Sent) {
		t.Fatalf("LAP received %v before sent %v after alignment", l.Received, l.Sent)
	}
	if r.Summary.Findings[string(OneSidedRearm)] != 0 {
		t.Fatal("skewed clocks made a one-sided-rearm of a good episode")
	}
}

// Without MADs both ways there is no shift and the note says what the
// uncertainty is.
func TestClockWithoutExchanges(t *testing.T) {
	pa, pb := twoHosts(t, false, false, 3*time.Millisecond, 10, 10)
	r := run(t, Options{}, pa, pb)
	c := r.Clocks[0]
	if c.Exchanges != 0 || c.Shift != 0 || !strings.Contains(c.Note, "clock sync") {
		t.Fatalf("clock: %+v", c)
	}
}

// Two recordings of one host (two apmwatch instances filtered by device)
// share CLOCK_BOOTTIME and pair by device.
func TestSameHostTwoRecordings(t *testing.T) {
	a, b := newHost(0), newHost(0)
	a.Device, b.Device = "rxe0", "rxe1"
	ownLIDs(a, 1, 2)
	ownLIDs(b, 3, 4)
	connect(a, 17, 17, 3)
	connect(b, 17, 17, 1)
	a.After(time.Second).PathMig(17)
	b.After(time.Second).PathMig(17)
	a.Rearm(17)
	dir := t.TempDir()
	pa := write(t, dir, "rxe0.rec", "lab", a, uint64(10*time.Second))
	pb := write(t, dir, "rxe1.rec", "lab", b, uint64(10*time.Second))
	r := run(t, Options{}, pa, pb)
	if len(r.Recordings) != 2 || r.Recordings[0].Side != "lab:rxe0.rec" || r.Recordings[1].Side != "lab:rxe1.rec" {
		t.Fatalf("sides: %+v", r.Recordings)
	}
	if r.Clocks[0].Method != "boottime" {
		t.Fatalf("clock: %+v", r.Clocks[0])
	}
	if len(r.Pairs) != 1 || r.Pairs[0].A != "lab:rxe0.rec/rxe0/17#1" || r.Pairs[0].B != "lab:rxe1.rec/rxe1/17#1" {
		t.Fatalf("pairs: %+v", r.Pairs)
	}
	if kinds(r)["one-sided-rearm@lab:rxe1.rec"] != 1 {
		t.Fatalf("findings: %v", kinds(r))
	}
	// --as names the sides
	r = run(t, Options{As: map[string]string{pa: "left", pb: "right"}}, pa, pb)
	if r.Pairs[0].A != "left/rxe0/17#1" {
		t.Fatalf("--as: %+v", r.Pairs)
	}
}

// One recording holding both devices pairs the QPs within it.
func TestPairWithinOneRecording(t *testing.T) {
	b := newHost(0)
	b.Device = "rxe0"
	ownLIDs(b, 1, 2)
	connect(b, 17, 18, 3)
	b.Device = "rxe1"
	ownLIDs(b, 3, 4)
	connect(b, 18, 17, 1)
	b.Device = "rxe0"
	connect(b, 19, 99, 3) // its peer is not recorded
	r := run(t, Options{}, write(t, t.TempDir(), "one.rec", "lab", b, uint64(5*time.Second)))
	if len(r.Pairs) != 1 || r.Pairs[0].A != "lab/rxe0/17#1" || r.Pairs[0].B != "lab/rxe1/18#2" {
		t.Fatalf("pairs: %+v", r.Pairs)
	}
}

// The lab module's --migrate: a forced MIGRATED modify then PATH_MIG is one
// migration, and the episode starts at the modify.
func TestForcedMigrationAndItsEventAreOne(t *testing.T) {
	a, b := newHost(0), newHost(0)
	a.Device, b.Device = "rxe0", "rxe1"
	ownLIDs(a, 1, 2)
	ownLIDs(b, 3, 4)
	connect(a, 21, 21, 3)
	connect(b, 21, 21, 1)
	a.After(time.Second).ForceMigrate(21)
	mig := a.Now() - uint64(time.Microsecond)
	a.After(500 * time.Microsecond).PathMig(21)
	a.Rearm(21)
	dir := t.TempDir()
	r := run(t, Options{}, write(t, dir, "a.rec", "lab", a, uint64(10*time.Second)), write(t, dir, "b.rec", "lab", b, uint64(10*time.Second)))
	if r.Summary.Migrations != 1 {
		t.Fatalf("%d migrations, want 1", r.Summary.Migrations)
	}
	ep := r.Pairs[0].Episodes
	if len(ep) != 1 || !ep[0].Start.Equal(t0.Add(time.Duration(mig))) {
		t.Fatalf("episodes %+v, want one starting at the forced migration", ep)
	}
}
