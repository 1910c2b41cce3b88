package publish

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A host with 100,000 QPs connected at once (more than the intake holds):
// the ends that do not fit stay changed, a heartbeat counts them as
// queued, and every one reaches the stream, as the audit loop ticks.
func TestHostWithAHundredThousandQPsPublishesThemAll(t *testing.T) {
	const n = 100_000
	url := fleettest.NATS(t)
	sys := t.TempDir()
	fleettest.FakeSysfs(t, sys, "ibsim0", 1, "fe80::1")
	p := newPublisher(t, url, "hostA", sys)
	for i := range uint32(n) {
		s := &side{p: p, dev: "ibsim0", qpn: 0x100 + i}
		s.connect(2, 0x200000+i)
	}
	p.Tick(time.Now())
	if d := p.deferred.Load(); d < n-intakeSize {
		t.Fatalf("after the first tick %d ends are kept back, want at least %d", d, n-intakeSize)
	}
	if q := p.queued(); q < n-intakeSize {
		t.Fatalf("a heartbeat now says %d queued, want at least %d", q, n-intakeSize)
	}
	ticks := 1
	fleettest.WaitFor(t, 5*time.Minute, "every end handed over", func() bool {
		p.Tick(time.Now()) // the audit loop's, every second; here as fast as the intake drains
		ticks++
		return p.deferred.Load() == 0
	})
	fleettest.WaitFor(t, 5*time.Minute, "the queue to drain", func() bool { return p.queued() == 0 })
	if got := testutil.ToFloat64(p.m.queued.WithLabelValues("conn")); got != n {
		t.Fatalf("%v records queued, want %d", got, n)
	}
	if got := testutil.ToFloat64(p.m.dropped.WithLabelValues("intake-full")); got != 0 {
		t.Fatalf("%v messages dropped at the intake", got)
	}
	seen := map[uint32]bool{}
	js := fleettest.JetStream(t, url)
	_, err := natsconn.ReadLast(t.Context(), js, wire.ConnStream, []string{wire.ConnPrefix + "*.hostA.>"}, 2*n, func(r natsconn.LastRecord) {
		if strings.HasPrefix(r.Subject, wire.ConnPrefix+"hb.") {
			return // the heartbeat
		}
		var c wire.Conn
		if err := json.Unmarshal(r.Data, &c); err != nil || c.Gone || !c.Armed || c.Remote.QPN != 0x200000+c.Local.QPN-0x100 {
			t.Errorf("%s: %s", r.Subject, r.Data)
			return
		}
		seen[c.Local.QPN] = true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("the stream holds the last record of %d ends, want %d", len(seen), n)
	}
	t.Logf("%d ends published over %d ticks", n, ticks)
}
