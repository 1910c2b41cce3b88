package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline/findinglinetest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// freePort returns a port nobody listens on now, so that a test can stop
// and start its server on the same address.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startServer(t *testing.T, listen, dir string) *Embedded {
	t.Helper()
	s, err := StartEmbedded(listen, dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeSysfs makes /sys/class/infiniband/DEV/ports/1/{lid,gids/0}.
func fakeSysfs(t *testing.T, root, dev string, lid uint16, gid string) {
	t.Helper()
	dir := filepath.Join(root, dev, "ports", "1")
	if err := os.MkdirAll(filepath.Join(dir, "gids"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "lid"), []byte("0x"+strconv.FormatUint(uint64(lid), 16)+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "gids", "0"), []byte(gid+"\n"), 0o644)
}

// side is one host's QP of a connection, driven by synthetic events as
// the probes deliver them.
type side struct {
	p    *Publisher
	dev  string
	qpn  uint32
	boot uint64
}

func (s *side) ev(e *event.Event) {
	s.boot += 1000
	e.Boot, e.Time, e.Device, e.QPN = s.boot, time.Now(), s.dev, s.qpn
	s.p.Observe(e)
}

// connect takes the QP to RTR towards the peer's LID and QPN, and arms it.
func (s *side) connect(dlid uint16, dqpn uint32) {
	s.ev(&event.Event{Kind: event.KindModify, Modify: &event.Modify{QPType: event.QPTypeRC, AttrMask: event.AttrState | event.AttrAV | event.AttrDestQPN,
		State: event.StateRTR, DestQPN: dqpn, Primary: &event.Path{Port: 1, DLID: dlid}}})
	s.arm()
}

func (s *side) arm() {
	s.ev(&event.Event{Kind: event.KindModify, Modify: &event.Modify{QPType: event.QPTypeRC, AttrMask: event.AttrAltPath | event.AttrPathMigState,
		MigState: event.MigRearm, Alt: &event.Path{Port: 1, DLID: 9}}})
}

func (s *side) pathMig() {
	s.ev(&event.Event{Kind: event.KindQPEvent, QP: &event.QPEvent{Type: event.EvPathMig, QPType: event.QPTypeRC}})
}

// testHeartbeat is the tests' publishers' heartbeat period.
const testHeartbeat = 100 * time.Millisecond

func newPublisher(t *testing.T, url, host, sysfs string) *Publisher {
	t.Helper()
	p, err := NewPublisher(PublishConfig{NATS: NATSOptions{URL: url}, Host: host, QueueDir: filepath.Join(t.TempDir(), "q"), SysfsRoot: sysfs,
		HeartbeatEvery: testHeartbeat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(time.Second) })
	return p
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// tail is the last n lines written.
func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := strings.Split(strings.TrimRight(s.b.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// outLine is what a test reads of a finding line (apm.Severity is
// written as a string and has no decoder).
type outLine struct {
	Type      string         `json:"type"`
	Host      string         `json:"host"`
	ID        uint64         `json:"id"`
	Kind      apm.Kind       `json:"kind"`
	QP        apm.Key        `json:"qp"`
	Evidence  []apm.Evidence `json:"evidence"`
	Resolved  bool           `json:"resolved"`
	Resolves  uint64         `json:"resolves"`
	Peer      *PeerEnd       `json:"peer"`
	Hosts     []string       `json:"hosts"`
	Partition int            `json:"partition"`
	FirstTime time.Time      `json:"first_time"`
	LastTime  time.Time      `json:"last_time"`
	Severity  string         `json:"severity"`
	Explain   string         `json:"explanation"`
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) lines(t *testing.T) []outLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []outLine
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var x outLine
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("bad line %q: %v", l, err)
		}
		if err := findinglinetest.Check([]byte(l)); err != nil {
			t.Errorf("a fleet line against the finding schema: %v\n%s", err, l)
		}
		out = append(out, x)
	}
	return out
}

// running is a fleet instance run by a test.
type running struct {
	out   *syncBuffer
	log   *syncBuffer // its log (stderr)
	ready string
	stop  func()
	done  chan error
}

func startFleet(t *testing.T, url string, instance, instances int) *running {
	t.Helper()
	return startFleetWith(t, url, instance, instances, nil)
}

// startFleetWith starts a fleet instance whose configuration mod changes
// from the tests' (a 500 ms deadline, no metrics).
func startFleetWith(t *testing.T, url string, instance, instances int, mod func(*Config)) *running {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NATS.URL, cfg.MetricsAddr, cfg.Instance, cfg.Instances = url, "", instance, instances
	cfg.Engine.Deadline = 500 * time.Millisecond
	cfg.ReadyFile = filepath.Join(t.TempDir(), "ready")
	if onCluster() {
		cfg.Limits.Replicas = 3 // the lease bucket too
	}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{out: &syncBuffer{}, log: &syncBuffer{}, ready: cfg.ReadyFile, done: make(chan error, 1)}
	go func() { r.done <- Run(ctx, cfg, r.out, r.log) }()
	r.stop = func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("fleet: %v", err)
		}
	}
	waitFor(t, 60*time.Second, "the ready file", func() bool { _, err := os.Stat(cfg.ReadyFile); return err == nil })
	return r
}

func (r *running) readyInfo(t *testing.T) Ready {
	b, err := os.ReadFile(r.ready)
	if err != nil {
		t.Fatal(err)
	}
	var x Ready
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	return x
}

// waitFor polls cond every 20ms; the limit only ends a hung test.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamMsgs returns the messages of a stream on a subject filter.
func streamMsgs(t *testing.T, url, stream, filter string) [][]byte {
	t.Helper()
	out, err := tryStreamMsgs(url, stream, filter)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tryStreamMsgs(url, stream, filter string) ([][]byte, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var out [][]byte
	_, err = readAll(context.Background(), js, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}}, func(m jetstream.Msg) {
		if isHeartbeat(m.Subject()) && !isHeartbeat(filter) {
			return // the hosts' heartbeats: not records
		}
		out = append(out, m.Data())
	})
	return out, err
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// testJetStream is JetStream on a connection of its own to url, closed
// when the test ends.
func testJetStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// onCluster: the fleet tests run against a 3-node cluster of nats-server
// processes (APMWATCH_FLEET_NATS=cluster, make fleet-faults) instead of
// the embedded server.
func onCluster() bool { return os.Getenv("APMWATCH_FLEET_NATS") == "cluster" }

// testNATS is the NATS a fleet test runs against, stopped when the test
// ends: the embedded server, or a 3-node cluster whose streams are R3
// (created here, before any publisher or instance would make them R1).
func testNATS(t *testing.T) string {
	t.Helper()
	url := testNATSBare(t)
	if !onCluster() {
		return url
	}
	l := DefaultLimits
	l.Replicas = 3
	if err := ensureStreams(t.Context(), testJetStream(t, url), l); err != nil {
		t.Fatal(err)
	}
	return url
}

// testNATSBare is testNATS without streams: for a test that makes its own.
func testNATSBare(t *testing.T) string {
	t.Helper()
	if !onCluster() {
		srv := startServer(t, "127.0.0.1:0", t.TempDir())
		t.Cleanup(srv.Shutdown)
		return srv.URL()
	}
	return startCluster(t, 3).URL()
}
