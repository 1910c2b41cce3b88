//go:build labguest

package guest

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/actuator"
	"github.com/apmwatch/apmwatch/collector"
)

// actionClock times the enforcer's actions, per device (one QP each in
// the window tests), in the order they ran: when the enforcer asked for the
// owner (the decision taken), when it called the actuator, and when each
// step the actuator logs was reached (resolve, check, send, verify). The
// times are CLOCK_BOOTTIME, the findings' clock.
type actionClock struct {
	mu   sync.Mutex
	acts map[string][]*actionMarks
	all  []*actionMarks // every action, in start order
}

type actionMarks struct {
	start uint64            // the owner asked for
	at    map[string]uint64 // step -> when first reached
}

func newActionClock() *actionClock { return &actionClock{acts: map[string][]*actionMarks{}} }

// enforcer returns an enforcer with policy p whose actions c times.
func (c *actionClock) enforcer(p actuator.Policy) *actuator.Enforcer {
	e := actuator.NewEnforcer(p, actuator.New(func(l actuator.LogEntry) { c.mark(l.Device, l.Step) }))
	owner, do := e.Owner, e.Do
	e.Owner = func(dev string, qpn uint32) (actuator.Owner, error) {
		c.mu.Lock()
		a := &actionMarks{start: collector.Boot(), at: map[string]uint64{}}
		c.acts[dev] = append(c.acts[dev], a)
		c.all = append(c.all, a)
		c.mu.Unlock()
		o, err := owner(dev, qpn)
		c.mark(dev, "owner")
		return o, err
	}
	e.Do = func(ctx context.Context, r actuator.Request) (*actuator.Result, error) {
		c.mark(r.Device, "do")
		return do(ctx, r)
	}
	return e
}

func (c *actionClock) mark(dev, step string) {
	now := collector.Boot()
	c.mu.Lock()
	defer c.mu.Unlock()
	if as := c.acts[dev]; len(as) > 0 {
		if a := as[len(as)-1]; a.at[step] == 0 {
			a.at[step] = now
		}
	}
}

// start is when the i-th action on dev (from 1) asked for the owner.
func (c *actionClock) start(dev string, i int) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if as := c.acts[dev]; len(as) >= i {
		return as[i-1].start, true
	}
	return 0, false
}

// actionParts are the parts of an action, each from the previous mark.
var actionParts = []struct{ name, from, to string }{
	{"owner", "", "owner"},       // rdma netlink get, /proc/PID/stat
	{"policy", "owner", "do"},    // the policy, the rate limit, the alternate (port state, link layer)
	{"resolve", "do", "resolve"}, // pidfd, the owner's fds, pidfd_getfd, the handle's query
	{"check", "resolve", "check"},
	{"modify+verify", "check", "verify"},
}

// logParts logs each part's distribution over the actions, and the first
// action's parts (the first after the daemon started).
func (c *actionClock) logParts(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	part := func(a *actionMarks, from, to string) (time.Duration, bool) {
		s := a.start
		if from != "" {
			s = a.at[from]
		}
		e := a.at[to]
		if s == 0 || e == 0 {
			return 0, false
		}
		return time.Duration(int64(e) - int64(s)), true
	}
	var first, dist string
	for _, p := range actionParts {
		var ds []time.Duration
		for _, a := range c.all {
			if d, ok := part(a, p.from, p.to); ok {
				ds = append(ds, d)
			}
		}
		if len(ds) == 0 {
			continue
		}
		if d, ok := part(c.all[0], p.from, p.to); ok {
			first += " " + p.name + " " + d.Round(10*time.Microsecond).String()
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		q := func(f float64) time.Duration { return ds[int(f*float64(len(ds)-1))].Round(10 * time.Microsecond) }
		dist += " " + p.name + " " + q(0.5).String() + " / " + q(0.99).String() + " / " + ds[len(ds)-1].Round(10*time.Microsecond).String() + ";"
	}
	t.Logf("the action's parts, p50 / p99 / max over %d actions:%s the first action:%s", len(c.all), dist, first)
}
