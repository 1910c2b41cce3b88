package fleet

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// fakeHost publishes a host's records and heartbeats as a publisher
// does, its clock skew away from the stream's: the tests choose each
// record's at and changed. A heartbeat never passes a record in flight
// (as a publisher's: it says 0 queued only when all it queued is stored).
type fakeHost struct {
	t     *testing.T
	nc    *nats.Conn
	js    jetstream.JetStream
	name  string
	lid   uint16
	skew  time.Duration
	run   string
	rev   uint64
	mu    sync.Mutex
	stop  chan struct{}
	done  chan struct{}
	beats bool
}

func newFakeHost(t *testing.T, url, name string, lid uint16, skew time.Duration) *fakeHost {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	h := &fakeHost{t: t, nc: nc, js: js, name: name, lid: lid, skew: skew, run: name + "-run1"}
	t.Cleanup(func() { h.stopBeats(); nc.Close() })
	return h
}

func (h *fakeHost) now() time.Time { return time.Now().Add(h.skew).UTC() }

// end is this host's armed end of a connection to the peer's LID and QPN.
func (h *fakeHost) end(qpn uint32, peer *fakeHost, rqpn uint32) *wire.Conn {
	c := fleettest.Conn(h.name, h.lid, qpn, peer.lid, rqpn)
	c.Changed = h.now()
	return &c
}

// publish stores the end's next revision now (its at) and returns when
// the stream stored it.
func (h *fakeHost) publish(c *wire.Conn) time.Time {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rev++
	c.Host, c.Run, c.Rev, c.At = h.name, h.run, h.rev, h.now()
	b, _ := json.Marshal(c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := h.js.Publish(ctx, wire.ConnSubject(c), b)
	if err != nil {
		h.t.Fatalf("%s: publishing: %v", h.name, err)
	}
	s, err := h.js.Stream(ctx, ack.Stream)
	if err != nil {
		h.t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, ack.Sequence)
	if err != nil {
		h.t.Fatal(err)
	}
	return m.Time
}

// migrate and rearm change the end at this host's now.
func (h *fakeHost) migrate(c *wire.Conn) time.Time {
	at := h.now()
	c.Armed, c.Changed = false, at
	c.Episode = wire.Episode{N: c.Episode.N + 1, Migrations: []time.Time{at}}
	return h.publish(c)
}

func (h *fakeHost) rearm(c *wire.Conn) time.Time {
	at := h.now()
	c.Armed, c.Changed, c.Episode.Rearm = true, at, at
	return h.publish(c)
}

func (h *fakeHost) beat() {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, _ := json.Marshal(wire.Heartbeat{Host: h.name, Run: h.run, At: h.now(), Every: testHeartbeat.Seconds()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.js.Publish(ctx, wire.HeartbeatSubject(h.name), b)
}

// startBeats sends a heartbeat now and every testHeartbeat.
func (h *fakeHost) startBeats() {
	if h.beats {
		return
	}
	h.beats = true
	h.stop, h.done = make(chan struct{}), make(chan struct{})
	h.beat()
	go func() {
		defer close(h.done)
		t := time.NewTicker(testHeartbeat)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				h.beat()
			}
		}
	}()
}

func (h *fakeHost) stopBeats() {
	if !h.beats {
		return
	}
	h.beats = false
	close(h.stop)
	<-h.done
}

// metric reads one series' value from an instance's /metrics.
func metric(t *testing.T, addr, series string) (float64, bool) {
	t.Helper()
	r, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// migratedPair is two heartbeating hosts, hostA (LID 1) and hostB (LID
// 2), and the ends of their connection (QPs 100 and 200), published armed
// and then migrated on both sides.
func migratedPair(t *testing.T, url string) (a, b *fakeHost, ea, eb *wire.Conn) {
	t.Helper()
	a = newFakeHost(t, url, "hostA", 1, 0)
	b = newFakeHost(t, url, "hostB", 2, 0)
	a.startBeats()
	b.startBeats()
	ea, eb = a.end(100, b, 200), b.end(200, a, 100)
	a.publish(ea)
	b.publish(eb)
	a.migrate(ea)
	b.migrate(eb)
	return a, b, ea, eb
}
