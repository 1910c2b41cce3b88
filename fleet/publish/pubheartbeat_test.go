package publish

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// A publisher heartbeats on its host's heartbeat subject: its run, its
// time, and 0 queued once what it queued is stored; messages handed to
// its queue and not yet in it count as queued.
func TestPublisherHeartbeatsWithItsQueueState(t *testing.T) {
	url := fleettest.NATS(t)
	sys := t.TempDir()
	fleettest.FakeSysfs(t, sys, "ibsim0", 1, "fe80::1")
	p := newPublisher(t, url, "hostA", sys)
	s := &side{p: p, dev: "ibsim0", qpn: 100}
	s.connect(2, 200)
	p.Tick(time.Now())
	var hb wire.Heartbeat
	fleettest.WaitFor(t, 20*time.Second, "a heartbeat after the record", func() bool {
		ms, err1 := fleettest.TryStreamMsgs(url, wire.ConnStream, wire.HeartbeatSubject("hostA"))
		recs, err2 := fleettest.TryStreamMsgs(url, wire.ConnStream, wire.ConnPrefix+">")
		if err1 != nil || err2 != nil || len(ms) == 0 || len(recs) == 0 {
			return false
		}
		hb = wire.Heartbeat{}
		return json.Unmarshal(ms[len(ms)-1], &hb) == nil && hb.Queued == 0
	})
	if hb.Host != "hostA" || hb.Run != p.tracker.Run || hb.Every != testHeartbeat.Seconds() || time.Since(hb.At) > time.Minute || time.Since(hb.At) < 0 {
		t.Fatalf("heartbeat %+v (run %s)", hb, p.tracker.Run)
	}
	if q := p.queued(); q != 0 {
		t.Fatalf("queued %d", q)
	}
	p.handing.Add(3) // three messages between the loop and the queue: a heartbeat counts them
	if q := p.queued(); q != 3 {
		t.Fatalf("queued %d, want 3", q)
	}
	p.handing.Add(-3)
}
