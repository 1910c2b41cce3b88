package publish

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestPublishQueueHoldsWhileNATSIsDownAndCatchesUp(t *testing.T) {
	listen, store := fleettest.FreePort(t), t.TempDir()
	srv := fleettest.StartServer(t, listen, store)
	url := srv.URL()
	p, err := NewPublisher(PublishConfig{NATS: natsconn.NATSOptions{URL: url}, Host: "hostA", QueueDir: filepath.Join(t.TempDir(), "q")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	line := func(i int) {
		p.Line(findingline.New(apm.Finding{ID: uint64(i), Kind: apm.MissedRearm}, "hostA"))
	}
	line(0)
	fleettest.WaitFor(t, 10*time.Second, "the first line stored", func() bool {
		m, err := fleettest.TryStreamMsgs(url, wire.FindingsStream, wire.HostFindingSubject("hostA"))
		return err == nil && len(m) == 1 && p.q.Stats().Pending == 0
	})
	srv.Shutdown()
	const n = 500
	for i := 1; i <= n; i++ {
		line(i)
	}
	fleettest.WaitFor(t, 10*time.Second, "the lines on disk", func() bool { return p.q.Stats().Pending == n })
	srv = fleettest.StartServer(t, listen, store)
	defer srv.Shutdown()
	fleettest.WaitFor(t, 30*time.Second, "the queue to drain", func() bool { return p.q.Stats().Pending == 0 })
	msgs := fleettest.StreamMsgs(t, url, wire.FindingsStream, wire.HostFindingSubject("hostA"))
	ids := map[uint64]bool{}
	for _, m := range msgs {
		var l struct {
			ID uint64 `json:"id"`
		}
		if err := json.Unmarshal(m, &l); err != nil {
			t.Fatal(err)
		}
		ids[l.ID] = true
	}
	if len(msgs) != n+1 || len(ids) != n+1 {
		t.Fatalf("%d messages, %d distinct, want %d", len(msgs), len(ids), n+1)
	}
	if st := p.q.Stats(); st.Dropped != 0 {
		t.Fatalf("dropped: %+v", st)
	}
}

// The audit loop's calls never wait for NATS nor for the disk: with no
// server at all, a burst larger than the hand-over channel returns, and
// every line is either queued or counted as dropped.
func TestPublisherNeverBlocksTheLoop(t *testing.T) {
	p, err := NewPublisher(PublishConfig{NATS: natsconn.NATSOptions{URL: "nats://" + fleettest.FreePort(t)}, Host: "hostA", QueueDir: filepath.Join(t.TempDir(), "q")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(0)
	const n = 3 * intakeSize
	for i := range n {
		p.Line(findingline.New(apm.Finding{ID: uint64(i + 1), Kind: apm.MissedRearm}, "hostA"))
	}
	queued := testutil.ToFloat64(p.m.queued.WithLabelValues("finding"))
	dropped := testutil.ToFloat64(p.m.dropped.WithLabelValues("intake-full"))
	if queued+dropped != n || queued < intakeSize {
		t.Fatalf("queued %v + dropped %v, want %d with at least %d queued", queued, dropped, n, intakeSize)
	}
	fleettest.WaitFor(t, 30*time.Second, "the queued lines on disk", func() bool { return p.q.Stats().Pending == int(queued) })
}
