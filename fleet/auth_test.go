package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/natsserver"
	"github.com/apmwatch/apmwatch/fleet/publish"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runFleet runs a fleet instance as cfg says (an embedded server unless
// cfg.NATS.URL) until the test ends, and waits for its ready file.
func runFleet(t *testing.T, cfg Config) (r *running, stderr *syncBuffer) {
	t.Helper()
	cfg.MetricsAddr = ""
	cfg.Engine.Deadline = 500 * time.Millisecond
	cfg.ReadyFile = filepath.Join(t.TempDir(), "ready")
	ctx, cancel := context.WithCancel(context.Background())
	r = &running{out: &syncBuffer{}, ready: cfg.ReadyFile, done: make(chan error, 1)}
	stderr = &syncBuffer{}
	go func() { r.done <- Run(ctx, cfg, r.out, stderr) }()
	r.stop = func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("fleet: %v", err)
		}
	}
	t.Cleanup(r.stop)
	fleettest.WaitFor(t, 20*time.Second, "the ready file", func() bool {
		select {
		case err := <-r.done:
			t.Fatalf("fleet ended: %v", err)
		default:
		}
		_, err := os.Stat(cfg.ReadyFile)
		return err == nil
	})
	return r, stderr
}

// text is what the buffer holds now.
func (s *syncBuffer) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// embeddedConfig is a fleet with its embedded server on a free loopback port.
func embeddedConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.Listen, cfg.StoreDir = "127.0.0.1:0", filepath.Join(t.TempDir(), "store")
	return cfg
}

// pairOver starts two publishers (hosts a and b, over a fake sysfs) with
// their own NATS options, logging to the buffers returned.
func pairOver(t *testing.T, oa, ob natsconn.NATSOptions, a, b string) (pa, pb *publish.Publisher, logs []*syncBuffer) {
	t.Helper()
	sys := t.TempDir()
	fleettest.FakeSysfs(t, sys, "ibsim0", 1, "fe80::1")
	fleettest.FakeSysfs(t, sys, "ibsim1", 2, "fe80::2")
	start := func(o natsconn.NATSOptions, host string) *publish.Publisher {
		log := &syncBuffer{}
		logs = append(logs, log)
		p, err := publish.NewPublisher(publish.PublishConfig{NATS: o, Host: host, QueueDir: filepath.Join(t.TempDir(), "q"), SysfsRoot: sys,
			Log: slogTo(log)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close(time.Second) })
		return p
	}
	return start(oa, a), start(ob, b), logs
}

// dial connects as o says, registered for denials (guard).
func dial(t *testing.T, o natsconn.NATSOptions) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := o.Connect(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// mustDeny runs call with a guarded context and wants the server's
// denial, in well under the 5 s an unanswered request would take.
func mustDeny(t *testing.T, nc *nats.Conn, what string, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gctx, done := natsconn.Guard(ctx, nc)
	defer done()
	start := time.Now()
	err := natsconn.Denied(gctx, call(gctx))
	var d *natsconn.DeniedError
	if !errors.As(err, &d) || time.Since(start) > 3*time.Second {
		t.Errorf("%s: %v after %v, want the server's denial at once", what, err, time.Since(start))
	}
}

// Without users (the default: loopback only) a client without
// credentials publishes and reads as before (scripts, hosts, fleet
// status on nats://127.0.0.1:4222), and administers nothing: it can
// neither delete nor purge a stream, nor create one (a memory stream
// would take the fleet's memory).
func TestEmbeddedWithoutUsersLetsLocalClientsPublishButNotAdminister(t *testing.T) {
	f, _ := runFleet(t, embeddedConfig(t))
	url := f.readyInfo(t).NATS
	a, b, _ := pairOver(t, natsconn.NATSOptions{URL: url}, natsconn.NATSOptions{URL: url}, "hostA", "hostB")
	oneSided(a, b, 1)
	fleettest.WaitFor(t, 20*time.Second, "a finding", func() bool { return len(f.out.lines(t)) == 1 })
	st, err := ReadStatus(context.Background(), natsconn.NATSOptions{URL: url})
	if err != nil || len(st.Rows) != 1 {
		t.Fatalf("fleet status without credentials: %v, %+v", err, st)
	}
	nc, js := dial(t, natsconn.NATSOptions{URL: url})
	mustDeny(t, nc, "deleting a stream", func(ctx context.Context) error { return js.DeleteStream(ctx, wire.ConnStream) })
	mustDeny(t, nc, "purging a stream", func(ctx context.Context) error {
		s, err := js.Stream(ctx, wire.ConnStream)
		if err != nil {
			return err
		}
		return s.Purge(ctx)
	})
	mustDeny(t, nc, "creating a memory stream", func(ctx context.Context) error {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "HOG", Subjects: []string{"hog.>"}, Storage: jetstream.MemoryStorage})
		return err
	})
	if n := len(fleettest.StreamMsgs(t, url, wire.ConnStream, wire.ConnPrefix+">")); n != 4 {
		t.Fatalf("%d records left in the stream, want 4", n)
	}
}

// Only a loopback --listen goes without users; the error is one line.
func TestListenBeyondLoopbackNeedsAuth(t *testing.T) {
	for _, l := range []string{"0.0.0.0:4222", ":4222", "192.0.2.1:4222", "fleet.example:4222", "[::]:4222"} {
		cfg := embeddedConfig(t)
		cfg.Listen = l
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "--auth") || strings.Contains(err.Error(), "\n") {
			t.Errorf("--listen %s without --auth: %v", l, err)
		}
		if _, err := natsserver.StartServer(cfg.server()); err == nil {
			t.Errorf("--listen %s without --auth: served", l)
		}
		cfg.Auth = "/etc/apmwatch/fleet-auth.conf"
		if err := cfg.Validate(); err != nil {
			t.Errorf("--listen %s with --auth: %v", l, err)
		}
	}
	for _, l := range []string{"127.0.0.1:4222", "[::1]:4222", "localhost:4222", "127.0.0.2:0"} {
		cfg := embeddedConfig(t)
		cfg.Listen = l
		if err := cfg.Validate(); err != nil {
			t.Errorf("--listen %s: %v", l, err)
		}
	}
}

// Through the users add-host makes, the embedded server takes no client
// without credentials; the hosts publish, the fleet judges their pair,
// fleet status reads as the fleet user; a host can publish nothing in
// another host's name, read no one else's records or replies, and
// administer nothing, while it may read its own last records.
func TestAddedHostsPublishOnlyTheirOwnSubjects(t *testing.T) {
	dir := t.TempDir()
	cfg := embeddedConfig(t)
	cfg.Auth = fleettest.AddUsers(t, dir)
	f, _ := runFleet(t, cfg)
	url := f.readyInfo(t).NATS
	if _, err := (natsconn.NATSOptions{URL: url}).Connect(false); err == nil {
		t.Fatal("a client without credentials connected")
	}
	a, b, logs := pairOver(t, fleettest.HostOpts(url, dir, "node17"), fleettest.HostOpts(url, dir, "node18"), "node17", "node18")
	defer func() {
		if t.Failed() {
			for _, l := range logs {
				t.Logf("publisher:\n%s", l.text())
			}
		}
	}()
	a.Line(findingline.New(apm.Finding{ID: 1, Kind: apm.MissedRearm}, "node17"))
	oneSided(a, b, 1)
	// the first message waits for the host's reading of its earlier records
	fleettest.WaitFor(t, 60*time.Second, "a finding", func() bool { return len(f.out.lines(t)) == 1 })
	if l := f.out.lines(t)[0]; l.Kind != apm.OneSidedRearm || !slices.Equal(l.Hosts, []string{"node17", "node18"}) {
		t.Fatalf("finding: %+v", l)
	}
	// a host's permissions let it read its own earlier records (its seeds)
	for i, l := range logs {
		if !strings.Contains(l.text(), "earlier records read") {
			t.Errorf("publisher %d did not read its earlier records:\n%s", i, l.text())
		}
	}
	fleetUser := natsconn.NATSOptions{URL: url, NKeyFile: filepath.Join(dir, "fleet.nk")}
	st, err := ReadStatus(context.Background(), fleetUser)
	if err != nil || len(st.Rows) != 1 {
		t.Fatalf("fleet status as the fleet user: %v %+v", err, st)
	}

	nc, js := dial(t, fleettest.HostOpts(url, dir, "node17"))
	pub := func(subject string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := js.Publish(ctx, subject, []byte(`{"host":"node18"}`))
			return err
		}
	}
	mustDeny(t, nc, "node18's finding lines", pub(wire.HostFindingSubject("node18")))
	mustDeny(t, nc, "node18's records", pub("apmwatch.conn.3.node18.ibsim1.200"))
	mustDeny(t, nc, "the fleet's findings", pub(wire.FleetFindingSubject(3)))
	mustDeny(t, nc, "deleting a stream", func(ctx context.Context) error { return js.DeleteStream(ctx, wire.ConnStream) })
	mustDeny(t, nc, "creating a stream", func(ctx context.Context) error {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "HOG", Subjects: []string{"hog.>"}})
		return err
	})
	mustDeny(t, nc, "reading node18's records", func(ctx context.Context) error {
		_, err := js.CreateConsumer(ctx, wire.ConnStream, jetstream.ConsumerConfig{FilterSubject: wire.ConnPrefix + "*.node18.>", AckPolicy: jetstream.AckNonePolicy})
		return err
	})
	mustDeny(t, nc, "reading every record", func(ctx context.Context) error {
		_, err := js.CreateConsumer(ctx, wire.ConnStream, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy})
		return err
	})
	mustDeny(t, nc, "others' replies", func(ctx context.Context) error {
		if _, err := nc.SubscribeSync("_INBOX.>"); err != nil {
			return err
		}
		nc.Flush()
		<-ctx.Done()
		return ctx.Err()
	})
	// its own last records, through one filter (the seeds' reading)
	nc2, js2 := dial(t, fleettest.HostOpts(url, dir, "node17"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var own []string
	_, err = natsconn.ReadAll(ctx, js2, wire.ConnStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{wire.ConnPrefix + "*.node17.>"},
		DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy}, func(m jetstream.Msg) {
		if !wire.IsHeartbeat(m.Subject()) { // its heartbeats are on a subject of its own too
			own = append(own, m.Subject())
		}
	})
	if err != nil || len(own) != 1 || !strings.Contains(own[0], ".node17.") {
		t.Fatalf("node17's own last records: %v %q", err, own)
	}
	nc2.Close()

	// nothing of node17's reached node18's subjects
	nf, jf := dial(t, fleetUser)
	_ = nf
	var lines []string
	if _, err := natsconn.ReadAll(ctx, jf, wire.FindingsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"apmwatch.finding.>"}},
		func(m jetstream.Msg) { lines = append(lines, m.Subject()) }); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(lines, wire.HostFindingSubject("node18")) || !slices.Contains(lines, wire.HostFindingSubject("node17")) {
		t.Fatalf("finding subjects stored: %q", lines)
	}
	var recs []string
	if _, err := natsconn.ReadAll(ctx, jf, wire.ConnStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{wire.ConnPrefix + ">"}},
		func(m jetstream.Msg) { recs = append(recs, string(m.Data())) }); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r == `{"host":"node18"}` {
			t.Fatal("node17's forged record was stored")
		}
	}
}

// A host whose permissions deny the consumer API (its seeds cannot be
// read) neither needs it nor waits for it: the reading gives up at the
// server's denial, and its line is stored at once.
func TestSeedsDeniedDoNotHoldThePublisher(t *testing.T) {
	dir := t.TempDir()
	authPath := fleettest.AddUsers(t, dir)
	b, _ := os.ReadFile(authPath)
	narrowed := strings.Replace(string(b), `"$JS.API.CONSUMER.CREATE.*.*.apmwatch.conn.*.node17.>",`, "", 1)
	if narrowed == string(b) {
		t.Fatal("no consumer permission to take away")
	}
	os.WriteFile(authPath, []byte(narrowed), 0o600)
	cfg := embeddedConfig(t)
	cfg.Auth = authPath
	f, _ := runFleet(t, cfg)
	log := &syncBuffer{}
	start := time.Now()
	p, err := publish.NewPublisher(publish.PublishConfig{NATS: fleettest.HostOpts(f.readyInfo(t).NATS, dir, "node17"), Host: "node17",
		QueueDir: filepath.Join(t.TempDir(), "q"), Log: slogTo(log)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	p.Line(findingline.New(apm.Finding{ID: 7, Kind: apm.MissedRearm}, "node17"))
	fleettest.WaitFor(t, 20*time.Second, "the line stored", func() bool {
		return published(t, p, "apmwatch_publish_queue_messages") == 0 && published(t, p, "apmwatch_published_total") == 1
	})
	if d := time.Since(start); d > 10*time.Second || !strings.Contains(log.text(), "cannot read this host's earlier records") ||
		!strings.Contains(log.text(), "denies") {
		t.Fatalf("stored after %v; log:\n%s", d, log.text())
	}
}
