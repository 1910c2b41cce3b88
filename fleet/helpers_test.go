package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline/findinglinetest"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/publish"
)

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
	if fleettest.OnCluster() {
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
	fleettest.WaitFor(t, 60*time.Second, "the ready file", func() bool { _, err := os.Stat(cfg.ReadyFile); return err == nil })
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

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// side (as in the publisher's tests) is one host's QP of a connection, driven by synthetic events as
// the probes deliver them.
type side struct {
	p    *publish.Publisher
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

func newPublisher(t *testing.T, url, host, sysfs string) *publish.Publisher {
	t.Helper()
	p, err := publish.NewPublisher(publish.PublishConfig{NATS: natsconn.NATSOptions{URL: url}, Host: host, QueueDir: filepath.Join(t.TempDir(), "q"), SysfsRoot: sysfs,
		HeartbeatEvery: testHeartbeat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(time.Second) })
	return p
}
