package publish

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
)

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

// testHeartbeat is the tests' publishers' heartbeat period.
const testHeartbeat = 100 * time.Millisecond

func newPublisher(t *testing.T, url, host, sysfs string) *Publisher {
	t.Helper()
	p, err := NewPublisher(PublishConfig{NATS: natsconn.NATSOptions{URL: url}, Host: host, QueueDir: filepath.Join(t.TempDir(), "q"), SysfsRoot: sysfs,
		HeartbeatEvery: testHeartbeat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(time.Second) })
	return p
}
