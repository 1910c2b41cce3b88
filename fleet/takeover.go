package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// Takeover: each instance is the home of share --instance. Every
// TTL/3 it says so (home.<s>), renews the leases it holds, gives back
// a share whose home runs again, and takes any share whose lease no one
// holds: its own at once, another's once that share's home has not
// announced itself for a TTL (and not in its own first two TTLs, while
// its peers start). A share whose renewal fails is dropped at once: its
// engine stops, what it held is gone, and whoever holds the lease now
// rebuilds it from the stream. With one instance there is no one to take
// over: it judges every partition, without leases. A share whose engine
// fails is restarted (failed), unless the failure is a denial.

// held is a share this instance judges.
type held struct {
	rev  uint64 // the lease's revision, as this instance last wrote it
	stop context.CancelFunc
	done chan struct{}
}

// shares is the instance's set of held shares.
type shares struct {
	in    *instance
	lk    *leases // nil: one instance, no leases
	start time.Time
	errs  chan shareErr // a share's engine that ended on an error

	mu    sync.Mutex
	wmu   sync.Mutex // one writer of the ready file
	held  map[int]*held
	lost  map[int]uint64 // the revision of a lease whose renewal failed (the lease loop's)
	ready bool           // the home share's rebuild is consumed: the ready file is written
	ends  int
}

// shareErr is share s's engine ending on err.
type shareErr struct {
	s   int
	err error
}

// takeover runs the instance's shares until ctx is done.
func (in *instance) takeover(ctx context.Context) error {
	t := &shares{in: in, start: time.Now(), errs: make(chan shareErr, wire.Partitions), held: map[int]*held{}, lost: map[int]uint64{}}
	if in.cfg.Instances == 1 {
		t.begin(ctx, in.cfg.Instance, 0)
		for {
			select {
			case <-ctx.Done():
				t.stopAll(nil)
				return nil
			case e := <-t.errs:
				if err := t.failed(ctx, e); err != nil {
					t.stopAll(nil)
					return err
				}
			}
		}
	}
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	lk, err := openLeases(c, in.js, in.cfg.Instance, in.cfg.LeaseTTL, in.cfg.Limits.Replicas)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if lk.ttl != in.cfg.LeaseTTL && lk.ttl > 0 {
		in.log.Warn("--lease-ttl differs from the lease bucket's TTL: using the bucket's, which the first instance set "+
			"(to change it: stop every instance and delete the bucket)", "lease_ttl", in.cfg.LeaseTTL, "bucket_ttl", lk.ttl, "bucket", wire.LeaseBucket)
		in.cfg.LeaseTTL = lk.ttl
	}
	t.lk = lk
	tick := time.NewTicker(in.cfg.LeaseTTL / 3)
	defer tick.Stop()
	for {
		t.round(ctx)
		select {
		case <-ctx.Done():
			t.stopAll(lk)
			return nil
		case e := <-t.errs:
			if err := t.failed(ctx, e); err != nil {
				t.stopAll(lk)
				return err
			}
		case <-tick.C:
		}
	}
}

// round is one pass over the shares.
func (t *shares) round(ctx context.Context) {
	cfg := t.in.cfg
	home := cfg.Instance
	c, cancel := context.WithTimeout(ctx, cfg.LeaseTTL/3)
	if err := t.lk.announce(c, home); err != nil && ctx.Err() == nil {
		t.in.log.Warn("lease bucket", "err", err)
	}
	cancel()
	for s := range cfg.Instances {
		if ctx.Err() != nil {
			return
		}
		t.one(ctx, s)
	}
}

// one renews, releases or takes share s, each request within TTL/3.
func (t *shares) one(ctx context.Context, s int) {
	cfg := t.in.cfg
	home := cfg.Instance
	c, cancel := context.WithTimeout(ctx, cfg.LeaseTTL/3)
	defer cancel()
	h := t.get(s)
	switch {
	case h != nil && s != home && t.lk.homeRuns(c, s):
		t.release(ctx, s, "its home instance runs again")
	case h != nil:
		rev, err := t.lk.renew(c, s, h.rev)
		if err != nil && ctx.Err() != nil {
			return // stopping: stopAll hands it over
		}
		if err != nil {
			t.drop(s, err)
			t.lost[s] = h.rev
			return
		}
		h.rev = rev
	case s != home && (time.Since(t.start) < 2*cfg.LeaseTTL || t.lk.homeRuns(c, s)):
	default:
		rev, err := t.retake(c, s)
		if err != nil {
			if !errors.Is(err, errLeaseHeld) && ctx.Err() == nil {
				t.in.log.Warn("lease bucket", "err", err)
			}
			return
		}
		if s != home {
			t.in.m.takeovers.Inc()
			t.in.log.Warn("share adopted: its home instance does not run and its lease expired", "share", s)
		}
		t.begin(ctx, s, rev)
	}
}

// retake takes share s's free lease or, when a renewal of it failed
// (NATS away a moment), the lease still at the revision this instance
// wrote: no one else wrote it since. In its first TTL an instance also
// takes its own share's lease from an earlier run of itself (reclaim):
// only then, so that two processes given one --instance by mistake do
// not take it from each other for ever (the later one keeps it).
func (t *shares) retake(ctx context.Context, s int) (uint64, error) {
	if rev, ok := t.lost[s]; ok {
		if n, err := t.lk.renew(ctx, s, rev); err == nil {
			delete(t.lost, s)
			return n, nil
		}
	}
	rev, err := t.lk.acquire(ctx, s)
	if errors.Is(err, errLeaseHeld) && s == t.in.cfg.Instance && time.Since(t.start) < t.in.cfg.LeaseTTL {
		if rev, err = t.lk.reclaim(ctx, s); err == nil {
			t.in.log.Info("share lease taken over from an earlier run of this instance", "share", s)
		}
	}
	if err == nil {
		delete(t.lost, s)
	}
	return rev, err
}

func (t *shares) get(s int) *held {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held[s]
}

// begin starts judging share s, under the lease at revision rev.
func (t *shares) begin(ctx context.Context, s int, rev uint64) {
	c, stop := context.WithCancel(ctx)
	h := &held{rev: rev, stop: stop, done: make(chan struct{})}
	t.mu.Lock()
	t.held[s] = h
	t.mu.Unlock()
	t.in.m.shareOwned.WithLabelValues(strconv.Itoa(s)).Set(1)
	t.in.log.Info("share held", "share", s, "partitions", sharePartitions(s, t.in.cfg.Instances), "shares", t.list())
	r := t.in.newShareRun(s, func(ends int) {
		if s == t.in.cfg.Instance {
			t.mu.Lock()
			t.ready, t.ends = true, ends
			t.mu.Unlock()
		}
		t.writeReady()
	})
	go func() {
		defer close(h.done)
		if err := r.run(c); err != nil && c.Err() == nil {
			t.errs <- shareErr{s, err}
		}
	}()
}

// failed handles share e.s's engine that ended on e.err. A denial (the
// user's permissions, the streams it may not create) would only repeat:
// the instance stops with it. Anything else (a stream lookup that timed
// out while the cluster elects a leader, a consumer lost with its node)
// restarts the share: its engine and what it held are dropped, and it is
// rebuilt from the stream: at the next round, under the lease still at
// the revision this instance wrote (no one else can take it meanwhile);
// with one instance, a second later.
func (t *shares) failed(ctx context.Context, e shareErr) error {
	var d *natsconn.DeniedError
	if errors.As(e.err, &d) || errors.Is(e.err, natsconn.ErrCreateStreams) {
		return fmt.Errorf("share %d: %w", e.s, e.err)
	}
	h := t.end(e.s)
	t.in.m.shareRestarts.Inc()
	t.in.log.Warn("share restarted: its engine failed; rebuilding it from the stream", "share", e.s, "err", e.err)
	if t.lk != nil {
		if h != nil {
			t.lost[e.s] = h.rev
		}
		return nil
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.begin(ctx, e.s, 0)
	}
	return nil
}

// end stops judging share s: its engine and what it held are dropped.
func (t *shares) end(s int) *held {
	t.mu.Lock()
	h := t.held[s]
	delete(t.held, s)
	t.mu.Unlock()
	if h == nil {
		return nil
	}
	h.stop()
	<-h.done
	t.in.m.shareOwned.WithLabelValues(strconv.Itoa(s)).Set(0)
	t.in.m.dropShare(s)
	t.writeReady()
	return h
}

// drop stops judging share s at once: its lease is no longer this
// instance's.
func (t *shares) drop(s int, err error) {
	t.end(s)
	t.in.log.Error("share dropped: its lease could not be renewed", "share", s, "err", err, "shares", t.list())
}

// release hands share s back: its engine stops, the findings it gave
// are settled, then its lease is deleted (at the revision this instance
// wrote) for its home to take.
func (t *shares) release(ctx context.Context, s int, why string) {
	h := t.end(s)
	if h == nil {
		return
	}
	t.in.fence.flush(ctx, t.in.cfg.LeaseTTL)
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.in.cfg.LeaseTTL)
	defer cancel()
	if err := t.lk.release(c, s, h.rev); err != nil {
		t.in.log.Warn("share released, its lease left to expire", "share", s, "why", why, "err", err, "shares", t.list())
		return
	}
	t.in.log.Info("share released", "share", s, "why", why, "shares", t.list())
}

// stopAll stops every share at exit; with leases, it hands them over at
// once (unless a test has it die as a crash would).
func (t *shares) stopAll(lk *leases) {
	ctx := context.Background()
	for _, s := range t.list() {
		if lk == nil || t.in.cfg.keepLeases {
			t.end(s)
			continue
		}
		t.release(ctx, s, "the instance stops")
	}
	if lk != nil && !t.in.cfg.keepLeases {
		c, cancel := context.WithTimeout(ctx, t.in.cfg.LeaseTTL)
		defer cancel()
		lk.leave(c, t.in.cfg.Instance)
	}
}

// list returns the shares held, in order.
func (t *shares) list() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]int, 0, len(t.held))
	for s := range t.held {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// writeReady writes the ready file, once the home share's rebuild is
// consumed, naming the shares held.
func (t *shares) writeReady() {
	cfg := t.in.cfg
	t.mu.Lock()
	ready, ends := t.ready, t.ends
	t.mu.Unlock()
	if !ready || cfg.ReadyFile == "" {
		return
	}
	ss := t.list()
	var ps []int
	for _, s := range ss {
		ps = append(ps, sharePartitions(s, cfg.Instances)...)
	}
	slices.Sort(ps)
	t.wmu.Lock()
	defer t.wmu.Unlock()
	r := Ready{NATS: t.in.url, Instance: cfg.Instance, Instances: cfg.Instances, Partitions: ps, Shares: ss, Ends: ends}
	if err := writeReady(cfg.ReadyFile, r); err != nil {
		t.in.log.Error("writing the ready file", "err", err)
	}
}
