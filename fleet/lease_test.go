package fleet

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
)

// testLeases opens the bucket as instance i would, on its own connection.
func testLeases(t *testing.T, url string, i int, ttl time.Duration) *leases {
	t.Helper()
	js := fleettest.JetStream(t, url)
	lk, err := openLeases(context.Background(), js, i, ttl, 1)
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// Of instances that take a free lease at once one wins; the revision
// check keeps it the winner's until it stops renewing, and one TTL after
// its last renewal another takes it.
func TestLeaseIsTakenByOneAndExpiresUnrenewed(t *testing.T) {
	url := fleettest.NATS(t)
	const ttl = 600 * time.Millisecond
	ctx := context.Background()
	lks := []*leases{testLeases(t, url, 0, ttl), testLeases(t, url, 1, ttl), testLeases(t, url, 2, ttl)}
	revs := make([]uint64, len(lks))
	errs := make([]error, len(lks))
	var wg sync.WaitGroup
	for i, lk := range lks {
		wg.Go(func() { revs[i], errs[i] = lk.acquire(ctx, 1) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner == -1:
			winner = i
		case err == nil:
			t.Fatalf("instances %d and %d both took the lease", winner, i)
		case !errors.Is(err, errLeaseHeld):
			t.Fatalf("instance %d: %v", i, err)
		}
	}
	if winner == -1 {
		t.Fatal("no instance took the free lease")
	}
	w, other := lks[winner], lks[(winner+1)%len(lks)]
	rev := revs[winner]
	for range 4 { // renewed past its TTL: still the winner's
		time.Sleep(ttl / 3)
		var err error
		if rev, err = w.renew(ctx, 1, rev); err != nil {
			t.Fatal(err)
		}
		if _, err := other.acquire(ctx, 1); !errors.Is(err, errLeaseHeld) {
			t.Fatalf("taken while renewed: %v", err)
		}
	}
	if _, err := other.renew(ctx, 1, rev-1); err == nil {
		t.Fatal("renewed with a stale revision")
	}
	start := time.Now()
	fleettest.WaitFor(t, 20*ttl, "the unrenewed lease to expire", func() bool {
		_, err := other.acquire(ctx, 1)
		return err == nil
	})
	t.Logf("taken %v after the last renewal (TTL %v)", time.Since(start).Round(10*time.Millisecond), ttl)
	if _, err := w.renew(ctx, 1, rev); err == nil {
		t.Fatal("the former holder renewed a lease taken since")
	}
}

// A released lease is free at once; the home key says whether a share's
// home runs, until it leaves or stops announcing itself.
func TestLeaseReleaseAndHome(t *testing.T) {
	url := fleettest.NATS(t)
	const ttl = 600 * time.Millisecond
	ctx := context.Background()
	a, b := testLeases(t, url, 0, ttl), testLeases(t, url, 1, ttl)
	rev, err := a.acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.release(ctx, 0, rev+1); err == nil {
		t.Fatal("released at a revision not the holder's")
	}
	if err := a.release(ctx, 0, rev); err != nil {
		t.Fatal(err)
	}
	if _, err := b.acquire(ctx, 0); err != nil {
		t.Fatalf("a released lease: %v", err)
	}
	if b.homeRuns(ctx, 1) {
		t.Fatal("home 1 runs before it said so")
	}
	if err := b.announce(ctx, 1); err != nil || !a.homeRuns(ctx, 1) {
		t.Fatalf("home 1 announced: %v", err)
	}
	if err := b.leave(ctx, 1); err != nil || a.homeRuns(ctx, 1) {
		t.Fatalf("home 1 left: %v", err)
	}
	b.announce(ctx, 1)
	fleettest.WaitFor(t, 20*ttl, "an unrenewed home to expire", func() bool { return !a.homeRuns(ctx, 1) })
}
