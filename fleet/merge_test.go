package fleet

import (
	"fmt"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestStreamMergeOrdersByStoredTime: messages of two streams come out in
// the order of their stored times; a stream with messages pending holds
// the other until they come; a caught-up stream holds a later message of
// the other only for the margin.
func TestStreamMergeOrdersByStoredTime(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	s := newStreamMerge(map[string]uint64{"A": 5, "B": 5})
	var out []int
	now := at(0)
	push := func(stream string, sec int, pending uint64) {
		s.push(stream, merged{stored: at(sec), pending: pending}, now)
	}
	popAll := func() {
		for {
			it, ok := s.pop(now)
			if !ok {
				return
			}
			out = append(out, int(it.stored.Sub(base)/time.Second))
		}
	}
	check := func(step string, want ...int) {
		t.Helper()
		popAll()
		if len(out) != len(want) {
			t.Fatalf("%s: handed over %v, want %v", step, out, want)
		}
		for i := range want {
			if out[i] != want[i] {
				t.Fatalf("%s: handed over %v, want %v", step, out, want)
			}
		}
	}
	push("A", 1, 3)
	push("A", 3, 2)
	check("B has said nothing, messages pending")
	push("B", 2, 1)
	check("B's first", 1, 2)
	push("B", 4, 0)
	check("B caught up, A's pending", 1, 2, 3)
	now = at(5)
	push("A", 5, 0)
	check("both caught up, A's last within the margin", 1, 2, 3, 4)
	now = at(5).Add(mergeMargin)
	check("the margin passed", 1, 2, 3, 4, 5)
	if s.held != 0 || s.OutOfOrder != 0 {
		t.Fatalf("held %d, out of order %d", s.held, s.OutOfOrder)
	}
}

// TestStreamMergeIsBounded: a stream that lags for good holds at most
// maxMerged messages of the others; past that they go on, counted.
func TestStreamMergeIsBounded(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	s := newStreamMerge(map[string]uint64{"A": 0, "B": 1})
	for i := range maxMerged + 10 {
		s.push("A", merged{stored: base.Add(time.Duration(i) * time.Millisecond), pending: 1}, base)
		for {
			if _, ok := s.pop(base); !ok {
				break
			}
		}
	}
	if s.held != maxMerged || s.OutOfOrder != 10 {
		t.Fatalf("held %d, out of order %d; want %d and 10", s.held, s.OutOfOrder, maxMerged)
	}
}

// TestFleetFollowsHeartbeatsAcrossOperatorStreams: with the records split
// over two streams by partition and the heartbeats in a third, an
// instance follows the heartbeats (merged with the records by stored
// time): a one-sided pair is judged once both hosts' heartbeats pass its
// deadline, a host that stops heartbeating is silent, and heard again.
func TestFleetFollowsHeartbeatsAcrossOperatorStreams(t *testing.T) {
	url := fleettest.NATSBare(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	streams := map[string][]string{"CONN_HB": {wire.HeartbeatPrefix + ">"}}
	for p := range wire.Partitions {
		name := fmt.Sprintf("CONN_%d", p*2/wire.Partitions)
		streams[name] = append(streams[name], wire.ConnFilter(p))
	}
	for name, subs := range streams {
		cfg := jetstream.StreamConfig{Name: name, Subjects: subs, MaxMsgsPerSubject: 4}
		if fleettest.OnCluster() {
			cfg.Replicas = 3
		}
		if _, err := js.CreateStream(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	f := startFleetWith(t, url, 0, 1, func(c *Config) { c.Engine.SilentAfter = time.Second })
	defer f.stop()
	a, b, ea, _ := migratedPair(t, url)
	a.rearm(ea)
	fleettest.WaitFor(t, 30*time.Second, "the one-sided rearm", func() bool { return len(f.out.lines(t)) > 0 })
	b.stopBeats()
	fleettest.WaitFor(t, 30*time.Second, "host-silent", func() bool { return len(f.out.lines(t)) > 1 })
	ls := f.out.lines(t)
	if len(ls) != 2 || ls[0].Kind != apm.OneSidedRearm || ls[0].QP.QPN != 200 || ls[1].Kind != apm.HostSilent || ls[1].Host != "hostB" {
		t.Fatalf("lines: %+v", ls)
	}
	b.startBeats()
	fleettest.WaitFor(t, 30*time.Second, "heard again", func() bool { return len(f.out.lines(t)) > 2 })
	ls = f.out.lines(t)
	if len(ls) != 3 || ls[2].Type != "resolution" || ls[2].Kind != apm.HostSilent || ls[2].Resolves != ls[1].ID {
		t.Fatalf("lines: %+v", ls)
	}
}
