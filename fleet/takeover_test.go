package fleet

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
)

// shares reads the shares an instance's ready file names (nil: none yet).
func (r *running) shares() []int {
	b, err := os.ReadFile(r.ready)
	if err != nil {
		return nil
	}
	var x Ready
	if jsonUnmarshal(b, &x) != nil {
		return nil
	}
	return x.Shares
}

// hostBQPNs returns the QPNs the findings name on hostB, and fails on a
// line that is not a one-sided finding there.
func hostBQPNs(t *testing.T, ls []outLine) []uint32 {
	t.Helper()
	var q []uint32
	for _, l := range ls {
		if l.Type != "finding" || l.Host != "hostB" {
			t.Fatalf("unexpected line: %+v", l)
		}
		q = append(q, l.QP.QPN)
	}
	return q
}

// Two instances; instance 1 dies (its leases left to expire): instance 0
// adopts share 1 and judges its connections; instance 1 returns: it takes
// its share back, instance 0 releases it. Every finding is written once,
// by one of them, across the whole run.
func TestFleetTakesOverTheShareOfADeadInstance(t *testing.T) {
	url := fleettest.NATS(t)
	const ttl = 600 * time.Millisecond
	withTTL := func(die bool) func(*Config) {
		return func(c *Config) { c.LeaseTTL, c.keepLeases = ttl, die }
	}
	addr0 := fleettest.FreePort(t)
	f0 := startFleetWith(t, url, 0, 2, func(c *Config) { withTTL(false)(c); c.MetricsAddr = addr0 })
	defer f0.stop()
	f1 := startFleetWith(t, url, 1, 2, withTTL(true))
	a, b := twoHosts(t, url)
	const n = 16
	written := func(rs ...*running) []outLine {
		var ls []outLine
		for _, r := range rs {
			ls = append(ls, r.out.lines(t)...)
		}
		return ls
	}

	oneSidedFrom(a, b, 100, 200, n) // both running
	fleettest.WaitFor(t, 30*time.Second, "the first findings", func() bool { return len(written(f0, f1)) >= n })

	f1.stop()
	died := time.Now()
	fleettest.WaitFor(t, 30*time.Second, "instance 0 to adopt share 1", func() bool { return slices.Equal(f0.shares(), []int{0, 1}) })
	t.Logf("share 1 adopted and rebuilt %v after instance 1 died (lease TTL %v)", time.Since(died).Round(10*time.Millisecond), ttl)
	before := len(f0.out.lines(t))
	oneSidedFrom(a, b, 300, 400, n) // instance 0 alone
	fleettest.WaitFor(t, 30*time.Second, "the second findings", func() bool { return len(f0.out.lines(t)) >= before+n })
	second := f0.out.lines(t)[before:]
	if q := hostBQPNs(t, second); len(q) != n || slices.Min(q) != 400 || slices.Max(q) != 400+n-1 {
		t.Fatalf("instance 0 alone wrote %v", q)
	}
	if !slices.ContainsFunc(second, func(l outLine) bool { return l.Partition%2 == 1 }) {
		t.Fatalf("no finding on share 1 among %+v", second)
	}
	// its gauges count the adopted share's connections with its own: all
	// 2n pairs, one-sided
	fleettest.WaitFor(t, 10*time.Second, "instance 0's gauges to count both shares", func() bool {
		v, ok := metric(t, addr0, `apmwatch_fleet_connections{state="one-sided"}`)
		return ok && v == 2*n
	})

	back := time.Now()
	g1 := startFleetWith(t, url, 1, 2, withTTL(false)) // ready once it holds share 1 again
	defer g1.stop()
	fleettest.WaitFor(t, 30*time.Second, "instance 0 to release share 1", func() bool { return slices.Equal(f0.shares(), []int{0}) })
	t.Logf("share 1 back home %v after instance 1 returned", time.Since(back).Round(10*time.Millisecond))
	if s := g1.shares(); !slices.Equal(s, []int{1}) {
		t.Fatalf("instance 1 holds %v", s)
	}
	before0 := len(f0.out.lines(t))
	oneSidedFrom(a, b, 500, 600, n) // both again
	fleettest.WaitFor(t, 30*time.Second, "the third findings", func() bool { return len(written(f0, g1)) >= before0+n })
	time.Sleep(time.Second) // twice the deadline: a line twice would be out by now
	for _, l := range f0.out.lines(t)[before0:] {
		if l.Partition%2 != 0 {
			t.Fatalf("instance 0 judged share 1 after it released it: %+v", l)
		}
	}
	for _, l := range g1.out.lines(t) {
		if l.Partition%2 != 1 {
			t.Fatalf("instance 1 judged share 0: %+v", l)
		}
	}
	all := hostBQPNs(t, written(f0, f1, g1))
	slices.Sort(all)
	var want []uint32
	for _, base := range []uint32{200, 400, 600} {
		for i := range uint32(n) {
			want = append(want, base+i)
		}
	}
	if !slices.Equal(all, want) {
		t.Fatalf("lines written across the run (hostB QPNs):\n got %v\nwant %v", all, want)
	}
}

// A renewal that fails (another revision wrote the lease) drops the
// share at once; the instance takes it again once that lease expires.
func TestFleetDropsAShareWhoseRenewFails(t *testing.T) {
	url := fleettest.NATS(t)
	const ttl = 3 * time.Second
	f := startFleetWith(t, url, 0, 2, func(c *Config) { c.LeaseTTL = ttl })
	defer f.stop()
	if s := f.shares(); !slices.Equal(s, []int{0}) {
		t.Fatalf("holds %v", s)
	}
	lk := testLeases(t, url, 9, ttl)
	if _, err := lk.kv.Put(t.Context(), leaseKey(0), []byte(`{"instance":9}`)); err != nil {
		t.Fatal(err)
	}
	put := time.Now()
	fleettest.WaitFor(t, 20*time.Second, "share 0 dropped", func() bool { return !slices.Contains(f.shares(), 0) })
	t.Logf("dropped %v after the lease was written over (renewal every %v)", time.Since(put).Round(10*time.Millisecond), ttl/3)
	fleettest.WaitFor(t, 30*time.Second, "share 0 taken again", func() bool { return slices.Contains(f.shares(), 0) })
}

// An embedded fleet without --auth makes the bucket; an instance that
// connects to it as the local user (no credentials) takes its share
// under a lease there.
func TestFleetLeasesAsTheLocalUser(t *testing.T) {
	cfg := embeddedConfig(t)
	cfg.Instances, cfg.LeaseTTL = 2, 600*time.Millisecond
	f0, _ := runFleet(t, cfg)
	second := DefaultConfig()
	second.NATS.URL, second.Instance, second.Instances, second.LeaseTTL = f0.readyInfo(t).NATS, 1, 2, cfg.LeaseTTL
	f1, _ := runFleet(t, second)
	if s0, s1 := f0.shares(), f1.shares(); !slices.Equal(s0, []int{0}) || !slices.Equal(s1, []int{1}) {
		t.Fatalf("shares: instance 0 %v, instance 1 %v", s0, s1)
	}
}

// An instance that dies and starts again within its lease's TTL takes its
// own share's lease over from its earlier run at once, instead of waiting
// it out; its peer neither adopts the share meanwhile nor holds it after.
func TestFleetRestartedWithinATTLTakesItsLeaseBack(t *testing.T) {
	url := fleettest.NATS(t)
	const ttl = 30 * time.Second
	withTTL := func(die bool) func(*Config) {
		return func(c *Config) { c.LeaseTTL, c.keepLeases = ttl, die }
	}
	f1 := startFleetWith(t, url, 1, 2, withTTL(false))
	defer f1.stop()
	f0 := startFleetWith(t, url, 0, 2, withTTL(true))
	f0.stop() // dies: its lease of share 0 stays for up to 30 s
	restarted := time.Now()
	g0 := startFleetWith(t, url, 0, 2, withTTL(false)) // ready once it holds share 0
	defer g0.stop()
	took := time.Since(restarted)
	t.Logf("share 0 held again %v after the restart (lease TTL %v)", took.Round(10*time.Millisecond), ttl)
	if took >= ttl/2 {
		t.Fatalf("the restarted instance waited %v for its own lease (TTL %v)", took, ttl)
	}
	if s0, s1 := g0.shares(), f1.shares(); !slices.Equal(s0, []int{0}) || !slices.Equal(s1, []int{1}) {
		t.Fatalf("shares: instance 0 %v, instance 1 %v", s0, s1)
	}
	a, b := twoHosts(t, url)
	oneSidedFrom(a, b, 100, 200, 8)
	fleettest.WaitFor(t, 30*time.Second, "the findings", func() bool { return len(g0.out.lines(t))+len(f1.out.lines(t)) >= 8 })
}

// Instances given different --lease-ttl: the bucket keeps the TTL of the
// one that made it, and a later instance uses that one, not its own (its
// renewals every third of its TTL would outlast a shorter bucket TTL).
func TestFleetLaterInstanceUsesTheBucketsLeaseTTL(t *testing.T) {
	url := fleettest.NATS(t)
	f0 := startFleetWith(t, url, 0, 2, func(c *Config) { c.LeaseTTL = 600 * time.Millisecond })
	defer f0.stop()
	f1 := startFleetWith(t, url, 1, 2, func(c *Config) { c.LeaseTTL, c.keepLeases = time.Minute, true })
	lk := testLeases(t, url, 9, 5*time.Second) // a third asking for yet another
	if lk.ttl != 600*time.Millisecond {
		t.Fatalf("the bucket's TTL is %v, want the first instance's 600ms", lk.ttl)
	}
	f1.stop() // dies: with its own minute it would be adopted a minute later
	died := time.Now()
	fleettest.WaitFor(t, 30*time.Second, "instance 0 to adopt share 1", func() bool { return slices.Equal(f0.shares(), []int{0, 1}) })
	t.Logf("adopted %v after the death (bucket TTL 600ms, the dead instance's --lease-ttl 1m)", time.Since(died).Round(10*time.Millisecond))
	if time.Since(died) > 20*time.Second {
		t.Fatal("the share waited for the dead instance's own --lease-ttl")
	}
}
