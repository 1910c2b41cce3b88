package fleet

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go"
)

// Hosts 5 s behind and 5 s ahead of the stream: an end of the host behind
// that migrates and rearms at once is not judged (its changed, 5 s in the
// past and the pair's latest, would make the deadline past at once), and a true one-sided rearm
// whose late end is the host ahead is judged with the deadline measured on
// the stream's clock (not 5 s later), its hosts' times kept as evidence;
// each host's clock offset is exported and shown by fleet status.
func TestFleetJudgesOnTheStreamClockWhateverTheHostsClocks(t *testing.T) {
	url := fleettest.NATS(t)
	const deadline = 3 * time.Second
	addr := fleettest.FreePort(t)
	f := startFleetWith(t, url, 0, 1, func(c *Config) { c.Engine.Deadline, c.MetricsAddr = deadline, addr })
	defer f.stop()
	a := newFakeHost(t, url, "hostA", 1, -5*time.Second)
	b := newFakeHost(t, url, "hostB", 2, 5*time.Second)
	a.startBeats()
	b.startBeats()
	a1, b1 := a.end(100, b, 200), b.end(200, a, 100)
	a2, b2 := a.end(101, b, 201), b.end(201, a, 101)
	b1.Changed = b.now().Add(-time.Minute) // armed a minute ago: hostA's change is the pair's latest
	for _, x := range []struct {
		h *fakeHost
		c *wire.Conn
	}{{a, a1}, {b, b1}, {a, a2}, {b, b2}} {
		x.h.publish(x.c)
	}
	// pair 1: hostA (behind) migrates and rearms at once
	a.migrate(a1)
	a.rearm(a1)
	// pair 2: both migrate, hostA rearms, hostB (ahead) never does
	a.migrate(a2)
	migB := b.migrate(b2)
	sinceB := migB.Add(-b2.At.Sub(b2.Changed)) // the change on the stream's clock: its receipt less the host's time from change to record
	rearmA := a.rearm(a2)
	want := rearmA.Add(-a2.At.Sub(a2.Changed))
	if sinceB.After(want) {
		want = sinceB
	}
	want = want.Add(deadline)

	fleettest.WaitFor(t, 30*time.Second, "the one-sided rearm", func() bool { return len(f.out.lines(t)) > 0 })
	ls := f.out.lines(t)
	l := ls[0]
	if len(ls) != 1 || l.Kind != apm.OneSidedRearm || l.Host != "hostB" || l.QP.QPN != 201 || l.Peer.QPN != 101 {
		t.Fatalf("lines: %+v", ls)
	}
	if !l.LastTime.Equal(want) {
		t.Fatalf("judged as due at %v, want %v (the later change's receipt plus %v)", l.LastTime, want, deadline)
	}
	// the hosts' own times are the evidence: hostB's migration by its clock, 5 s ahead
	if l.FirstTime.Before(migB.Add(4*time.Second)) || !strings.Contains(l.Evidence[0].What, "no rearm since") {
		t.Fatalf("evidence: first %v (hostB migrated at %v by the stream), %+v", l.FirstTime, migB, l.Evidence)
	}
	for host, skew := range map[string]float64{"hostA": -5, "hostB": 5} {
		v, ok := metric(t, addr, `apmwatch_fleet_host_clock_offset_seconds{host="`+host+`"}`)
		if !ok || v < skew-1 || v > skew+0.5 {
			t.Fatalf("%s's clock offset %v (%v), want about %v", host, v, ok, skew)
		}
	}
	st, err := ReadStatus(context.Background(), natsconn.NATSOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	var tab strings.Builder
	if err := WriteStatusFit(&tab, st); err != nil {
		t.Fatal(err)
	}
	if len(st.Hosts) != 2 || st.Hosts[0].Offset > -4*time.Second || st.Hosts[1].Offset < 4*time.Second ||
		!strings.Contains(tab.String(), "host hostA: clock -5.") || !strings.Contains(tab.String(), "2 hosts heard, 0 silent") {
		t.Fatalf("status hosts %+v\n%s", st.Hosts, tab.String())
	}
}

// A fleet that lags (held back while the hosts publish, then let go)
// judges the states as they lasted on the stream's clock: the pairs that
// passed through one-sided for less than the deadline are not judged, the
// one that stayed one-sided is, and nothing else: a pair made one-sided
// after the instance caught up is judged after it (its deadline is later),
// so the lines end there.
func TestFleetThatLagsJudgesOnlyWhatLastedPastTheDeadline(t *testing.T) {
	url := fleettest.NATS(t)
	const deadline = 2 * time.Second
	var held sync.Mutex
	f := startFleetWith(t, url, 0, 1, func(c *Config) {
		c.Engine.Deadline = deadline
		c.hold = func() { held.Lock(); held.Unlock() }
	})
	defer f.stop()
	a := newFakeHost(t, url, "hostA", 1, 0)
	b := newFakeHost(t, url, "hostB", 2, 0)
	a.startBeats()
	b.startBeats()

	held.Lock()
	var as, bs []*wire.Conn
	for i := range uint32(4) {
		as, bs = append(as, a.end(100+i, b, 200+i)), append(bs, b.end(200+i, a, 100+i))
		a.publish(as[i])
		b.publish(bs[i])
	}
	a.migrate(as[0]) // pair 0: both migrate and rearm
	b.migrate(bs[0])
	a.rearm(as[0])
	b.rearm(bs[0])
	a.migrate(as[1]) // pair 1: both migrate, hostA rearms: one-sided
	b.migrate(bs[1])
	a.rearm(as[1])
	a.migrate(as[2]) // pair 2: hostA migrates and rearms
	last := a.rearm(as[2])
	fleettest.WaitFor(t, 30*time.Second, "the lag to pass the deadline", func() bool { return time.Since(last) > deadline+time.Second })
	held.Unlock()

	a.migrate(as[3]) // pair 3, after the lag: one-sided
	b.migrate(bs[3])
	a.rearm(as[3])
	fleettest.WaitFor(t, 30*time.Second, "pair 3's finding", func() bool {
		for _, l := range f.out.lines(t) {
			if l.QP.QPN == 203 {
				return true
			}
		}
		return false
	})
	ls := f.out.lines(t)
	if len(ls) != 2 || ls[0].Kind != apm.OneSidedRearm || ls[0].Type != "finding" || ls[0].Host != "hostB" || ls[0].QP.QPN != 201 ||
		ls[1].Kind != apm.OneSidedRearm || ls[1].QP.QPN != 203 {
		t.Fatalf("lines: %+v", ls)
	}
}

// stored hands the engine a record as the stream stored it at at.
func stored(t *testing.T, g *Engine, c wire.Conn, at time.Time) {
	t.Helper()
	if why := take(t, g, c, wire.ConnSubject(&c), at); why != "" {
		t.Fatalf("refused: %s", why)
	}
}

// beat hands the engine a heartbeat of host, sent at its at, stored at stored.
func beat(t *testing.T, g *Engine, host string, at, stored time.Time, queued uint64) {
	t.Helper()
	b, _ := json.Marshal(wire.Heartbeat{Host: host, Run: host + "-1", At: at, Queued: queued})
	if why := g.TakeHeartbeat(Received{Subject: wire.HeartbeatSubject(host), Stored: stored, Data: b}, stored); why != "" {
		t.Fatalf("refused: %s", why)
	}
}

// A due pair waits until both its hosts have published past its due time:
// a heartbeat that says messages are still queued does not move its host's
// watermark, one that says none are does; the finding's last_time is the
// due time on the stream's clock.
func TestEngineJudgesOnlyPastBothHostsWatermarks(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	s := fleettest.T0
	beat(t, g, "hostA", s, s, 0)
	beat(t, g, "hostB", s, s, 0)
	a, b := fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
	a.Run, b.Run = "hostA-1", "hostB-1"
	stored(t, g, a, s)
	stored(t, g, b, s)
	m := s.Add(10 * time.Second)
	a, b = fleettest.Migrated(a, m), fleettest.Migrated(b, m)
	stored(t, g, a, m)
	stored(t, g, b, m)
	a = fleettest.Rearmed(a, m.Add(100*time.Millisecond))
	stored(t, g, a, m.Add(100*time.Millisecond))
	due := m.Add(2100 * time.Millisecond)
	beat(t, g, "hostA", m.Add(5*time.Second), m.Add(5*time.Second), 0)
	g.Advance(m.Add(5 * time.Second))
	if len(got) != 0 {
		t.Fatalf("judged before hostB published past the deadline: %+v", got)
	}
	beat(t, g, "hostB", m.Add(5*time.Second), m.Add(5*time.Second), 3) // its queue still holds records
	if len(got) != 0 {
		t.Fatalf("judged on a heartbeat with records queued before it: %+v", got)
	}
	beat(t, g, "hostB", m.Add(6*time.Second), m.Add(6*time.Second), 0)
	if len(got) != 1 || got[0].Kind != apm.OneSidedRearm || got[0].Host != "hostB" || !got[0].LastTime.Equal(due) {
		t.Fatalf("findings: %+v", got)
	}
}

// An instance's reading of the stream's clock stands at the message it is
// at while anything is left to consume, stands still while it is not
// current (NATS away, messages received and not yet handled, a stream or
// consumer that does not answer) without counting that time afterwards,
// and runs on its own clock from the latest receipt once it has consumed
// all there was.
func TestStreamClockStandsWhileTheInstanceLags(t *testing.T) {
	c := newStreamClock()
	wall := fleettest.T0.Add(time.Hour) // the instance's clock: not the stream's
	if !c.at(wall, true).IsZero() {
		t.Fatal("a clock with nothing consumed reads a time")
	}
	c.pending["S"] = 10
	c.consumed("S", fleettest.T0, 5, wall)
	if got := c.at(wall.Add(time.Minute), true); !got.Equal(fleettest.T0) {
		t.Fatalf("lagging: %v, want %v", got, fleettest.T0)
	}
	c.consumed("S", fleettest.T0.Add(time.Second), 0, wall.Add(2*time.Minute))
	if got := c.at(wall.Add(3*time.Minute), true); !got.Equal(fleettest.T0.Add(time.Second + time.Minute)) {
		t.Fatalf("caught up: %v", got)
	}
	// not current for half a minute: the clock stands, and that time
	// never counts once it is current again
	if got := c.at(wall.Add(3*time.Minute+30*time.Second), false); !got.Equal(fleettest.T0.Add(time.Second + time.Minute)) {
		t.Fatalf("not current: %v", got)
	}
	if got := c.at(wall.Add(3*time.Minute+31*time.Second), true); !got.Equal(fleettest.T0.Add(time.Second + time.Minute + time.Second)) {
		t.Fatalf("current again: %v, want the clock where it stood plus a second", got)
	}
	c.consumed("T", fleettest.T0, 1, wall) // another stream still behind
	if got := c.at(wall.Add(4*time.Minute), true); !got.Equal(fleettest.T0.Add(time.Second)) {
		t.Fatalf("one stream behind: %v", got)
	}
}

// Every instance follows every host's heartbeats, and only the one whose
// partitions hold the host's gives its host-silent lines.
func TestEngineGivesHostSilentOnlyForTheHostsItOwns(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{SilentAfter: time.Second, OwnsHost: func(h string) bool { return h == "hostA" }}, collect(&got))
	beat(t, g, "hostA", fleettest.T0, fleettest.T0, 0)
	beat(t, g, "hostB", fleettest.T0, fleettest.T0, 0)
	g.Advance(fleettest.T0.Add(2 * time.Second))
	if len(got) != 1 || got[0].Host != "hostA" || got[0].Partition != HostPartition("hostA") || !g.Silent("hostA") || !g.Silent("hostB") {
		t.Fatalf("lines %+v", got)
	}
	beat(t, g, "hostB", fleettest.T0.Add(3*time.Second), fleettest.T0.Add(3*time.Second), 0)
	if len(got) != 1 || g.Silent("hostB") {
		t.Fatalf("hostB heard again: %+v", got)
	}
}

// A record sent while others of its publisher were in flight (header
// BehindHeader above 0) does not move its host's watermark: a record sent
// before it may have failed and come later. One sent with none in flight,
// or by a publisher that does not say, does.
func TestEngineWatermarkMovesOnlyOnARecordSentWithNothingInFlight(t *testing.T) {
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, func(Line) {})
	beat(t, g, "hostA", fleettest.T0, fleettest.T0, 0)
	wm := func() time.Time {
		for _, h := range g.HostClocks() {
			if h.Host == "hostA" {
				return h.Watermark
			}
		}
		t.Fatal("hostA not heard")
		return time.Time{}
	}
	send := func(qpn uint32, at time.Time, behind int) {
		t.Helper()
		c := fleettest.Conn("hostA", 1, qpn, 2, qpn+100)
		b, _ := json.Marshal(&c)
		if _, why := g.Take(Received{Subject: wire.ConnSubject(&c), Stored: at, Data: b, Behind: behind}, at); why != "" {
			t.Fatalf("refused: %s", why)
		}
	}
	send(17, fleettest.T0.Add(time.Second), 1)
	if !wm().Equal(fleettest.T0) {
		t.Fatalf("watermark %v after a record sent behind another, want %v", wm(), fleettest.T0)
	}
	send(16, fleettest.T0.Add(2*time.Second), 0)
	if !wm().Equal(fleettest.T0.Add(2 * time.Second)) {
		t.Fatalf("watermark %v after a record sent with nothing in flight", wm())
	}
	if n := behind(nats.Header{wire.BehindHeader: []string{"x"}}); n != 0 {
		t.Fatalf("a header that is no count reads %d", n)
	}
	if n := behind(nats.Header{wire.BehindHeader: []string{"3"}}); n != 3 {
		t.Fatalf("header 3 reads %d", n)
	}
}

// A stretch in which the stream stored nothing from any host (a server
// that stored nothing for 43 s, then every host's heartbeat at once)
// makes no host silent: the first heartbeat after it moves the clock 43 s
// at once, but only a third of SilentAfter of that counts. A host that
// stays unheard while the others are heard is still silent.
func TestEngineCountsNoSilenceWhileNothingWasStored(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{SilentAfter: 30 * time.Second}, collect(&got))
	g.Live()
	hosts := []string{"hostA", "hostB", "hostC"}
	for _, h := range hosts {
		beat(t, g, h, fleettest.T0, fleettest.T0, 0)
	}
	after := fleettest.T0.Add(43 * time.Second)
	for i, h := range hosts[:2] { // hostC is not heard after the stall
		at := after.Add(time.Duration(i) * time.Millisecond)
		beat(t, g, h, at, at, 0)
		g.Advance(at)
	}
	if len(got) != 0 {
		t.Fatalf("silent after a stretch with nothing stored: %+v", got)
	}
	for s := 1; s <= 25; s++ { // hostA and hostB heard every second: hostC silent past 30 s of counted time
		at := after.Add(time.Duration(s) * time.Second)
		beat(t, g, "hostA", at, at, 0)
		beat(t, g, "hostB", at, at, 0)
		g.Advance(at)
		if silent := len(got) > 0; silent != (s > 20) {
			t.Fatalf("%d s after the stall (10 s counted before it): lines %+v", s, got)
		}
	}
	if len(got) != 1 || got[0].Host != "hostC" || !strings.Contains(got[0].Evidence[0].What, "33s of it with nothing stored by any host, not counted") {
		t.Fatalf("lines %+v", got)
	}
}
