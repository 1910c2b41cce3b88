package publish

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// A restarted publisher seeds its tracker with one record per end of
// its host: the last.
func TestPublisherSeedsWithTheLastRecordOfEachOfItsEnds(t *testing.T) {
	url := fleettest.NATS(t)
	js := fleettest.JS(t, url)
	const n, rounds = 1100, 3
	fleettest.Fillers(t, js, n, rounds)
	fleettest.Store(t, js, fleettest.Dated(fleettest.Conn("hostA", 1, 17, 2, 18))) // another host's
	p, err := NewPublisher(PublishConfig{NATS: natsconn.NATSOptions{URL: url}, Host: "hostC", QueueDir: filepath.Join(t.TempDir(), "q")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	var cs []wire.Conn
	select {
	case cs = <-p.seeds:
	case <-time.After(30 * time.Second):
		t.Fatal("no seeds in 30s")
	}
	ends := map[string]bool{}
	for _, c := range cs {
		if c.Host != "hostC" || c.Rev != rounds {
			t.Fatalf("seed %+v: not hostC's last record", c)
		}
		ends[fmt.Sprint(c.Device, c.Local.QPN)] = true
	}
	if len(cs) != n || len(ends) != n {
		t.Fatalf("%d seeds of %d ends, want %d", len(cs), len(ends), n)
	}
}

// A host reads its earlier records back with the permissions fleet
// add-host gives it: a consumer of one filter, its own subjects.
func TestPublisherSeedsThroughItsHostsPermissions(t *testing.T) {
	dir := t.TempDir()
	url := fleettest.AuthServer(t, dir)
	sys := t.TempDir()
	fleettest.FakeSysfs(t, sys, "ibsim0", 1, "fe80::1")
	a, err := NewPublisher(PublishConfig{NATS: fleettest.HostOpts(url, dir, "node17"), Host: "node17", QueueDir: filepath.Join(t.TempDir(), "q"), SysfsRoot: sys})
	if err != nil {
		t.Fatal(err)
	}
	s := &side{p: a, dev: "ibsim0", qpn: 100}
	s.connect(2, 200)
	a.Tick(time.Now())
	nc, err := fleettest.FleetUser(url, dir).Connect(false)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	fleettest.WaitFor(t, 30*time.Second, "the record", func() bool {
		n, err := natsconn.ReadAll(context.Background(), js, wire.ConnStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{wire.ConnPrefix + "*.node17.ibsim0.100"}}, func(jetstream.Msg) {})
		return err == nil && n == 1
	})
	a.Close(time.Second)
	again, err := NewPublisher(PublishConfig{NATS: fleettest.HostOpts(url, dir, "node17"), Host: "node17", QueueDir: filepath.Join(t.TempDir(), "q")})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(time.Second)
	select {
	case cs := <-again.seeds:
		if len(cs) != 1 || cs[0].Local.QPN != 100 {
			t.Fatalf("seeds: %+v", cs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no seeds in 30s")
	}
}
