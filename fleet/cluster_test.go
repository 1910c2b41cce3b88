package fleet

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/publish"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// The long versions (make fleet-faults) kill every node in turn and kill
// and bring back an instance more than once.
func longFaults() bool { return os.Getenv("APMWATCH_FLEET_FAULTS") == "long" }

// clusterRun is two fleet instances and two hosts on a 3-node cluster
// whose streams and lease bucket are R3; rounds of one-sided rearms
// between faults, and the hostB QPNs every round expects.
type clusterRun struct {
	t    *testing.T
	cl   *fleettest.NATSCluster
	a, b *publish.Publisher
	fs   []*running // every instance started, dead ones included
	next uint32
	want []uint32
	// the publishers' logs, shown when a round fails
	alog, blog *syncBuffer
}

const clusterTTL = 2 * time.Second

func clusterInstance(t *testing.T, url string, i int, die bool) *running {
	return startFleetWith(t, url, i, 2, func(c *Config) {
		c.LeaseTTL, c.keepLeases, c.Limits.Replicas = clusterTTL, die, 3
	})
}

// round publishes n one-sided rearms on fresh QPNs and waits until the
// live instances wrote them all.
func (r *clusterRun) round(what string, n int, live ...*running) {
	r.t.Helper()
	qa, qb := 1000+r.next, 5000+r.next
	r.next += uint32(n)
	oneSidedFrom(r.a, r.b, qa, qb, n)
	for i := range uint32(n) {
		r.want = append(r.want, qb+i)
	}
	start := time.Now()
	said := false
	fleettest.WaitFor(r.t, 90*time.Second, what, func() bool {
		if len(r.written()) >= len(r.want) {
			return true
		}
		if time.Since(start) > 89*time.Second && !said {
			said = true
			r.t.Logf("%s: %d of %d lines written", what, len(r.written()), len(r.want))
			r.explain(qa, qb, n)
			for i, f := range r.fs {
				r.t.Logf("instance %d's log (its run %d of this test), its last lines:\n%s", min(i, 1), max(0, i-1), f.log.tail(60))
			}
		}
		return false
	})
	r.t.Logf("%s: %d findings written in %v", what, n, time.Since(start).Round(10*time.Millisecond))
}

func (r *clusterRun) written() []outLine {
	var ls []outLine
	for _, f := range r.fs {
		ls = append(ls, f.out.lines(r.t)...)
	}
	return ls
}

// check waits twice the deadline (a line twice would be out by then) and
// compares every line written with the rounds' QPNs: none false, none
// twice, none lost.
func (r *clusterRun) check() {
	r.t.Helper()
	time.Sleep(2 * DefaultConfig().Engine.Deadline)
	got := hostBQPNs(r.t, r.written())
	slices.Sort(got)
	want := slices.Clone(r.want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		r.t.Fatalf("lines written across the run (hostB QPNs):\n got %v\nwant %v", got, want)
	}
}

// connLeader is the node that leads the connection stream now.
func (r *clusterRun) connLeader() int {
	r.t.Helper()
	js := fleettest.JetStream(r.t, r.cl.URL())
	var leader string
	fleettest.WaitFor(r.t, 30*time.Second, "the connection stream's leader", func() bool {
		s, err := js.Stream(r.t.Context(), wire.ConnStream)
		if err != nil {
			return false
		}
		info, err := s.Info(r.t.Context())
		if err != nil || info.Cluster == nil {
			return false
		}
		leader = info.Cluster.Leader
		return leader != ""
	})
	return r.cl.Index(leader)
}

// On a real 3-node cluster (nats-server processes, R3 streams and
// leases): the connection stream's leader killed and brought back, then
// an instance killed and its share taken over. Every one-sided rearm is
// written exactly once, by one instance, and no other line is written
// (no host-silent while a leader is elected, no false finding).
func TestFleetOnAThreeNodeClusterThroughFaults(t *testing.T) {
	cl := fleettest.StartCluster(t, 3)
	url := cl.URL()
	r := &clusterRun{t: t, cl: cl}
	f0 := clusterInstance(t, url, 0, false)
	defer f0.stop()
	f1 := clusterInstance(t, url, 1, true)
	r.fs = []*running{f0, f1}
	r.alog, r.blog = &syncBuffer{}, &syncBuffer{}
	r.a, r.b = twoLoggedHosts(t, url, r.alog, r.blog)
	const n = 12
	r.round("all nodes up", n)

	kills := []int{r.connLeader()}
	if longFaults() {
		kills = []int{0, 1, 2}
	}
	for _, k := range kills {
		killed := time.Now()
		cl.Kill(k)
		r.round("node "+cl.Nodes[k].Name+" down", n)
		cl.Start(k)
		cl.WaitJetStream()
		cl.WaitCurrent()
		r.round("node "+cl.Nodes[k].Name+" back", n)
		t.Logf("node %s down and back: %v", cl.Nodes[k].Name, time.Since(killed).Round(10*time.Millisecond))
	}

	// a lease renewal that failed while a node was down may have moved a
	// share for a while: each back home before an instance is killed
	fleettest.WaitFor(t, 60*time.Second, "each share at its home", func() bool {
		return slices.Equal(f0.shares(), []int{0}) && slices.Equal(f1.shares(), []int{1})
	})
	cycles := 1
	if longFaults() {
		cycles = 3
	}
	home := f1
	for range cycles {
		home.stop()
		died := time.Now()
		fleettest.WaitFor(t, 60*time.Second, "instance 0 to adopt share 1", func() bool { return slices.Equal(f0.shares(), []int{0, 1}) })
		t.Logf("share 1 adopted %v after its instance died (lease TTL %v)", time.Since(died).Round(10*time.Millisecond), clusterTTL)
		r.round("instance 1 dead", n)
		home = clusterInstance(t, url, 1, true)
		r.fs = append(r.fs, home)
		fleettest.WaitFor(t, 60*time.Second, "instance 0 to hand share 1 back", func() bool { return slices.Equal(f0.shares(), []int{0}) })
		r.round("instance 1 back", n)
	}
	home.stop()
	r.check()
}
