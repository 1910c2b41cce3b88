package publish

import (
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

func TestOwnSubject(t *testing.T) {
	c := &wire.Conn{Host: "host A.example", Device: "mlx5_0", Local: wire.Addr{GID: "fe80::1", LID: 1, QPN: 1<<24 - 1}, Remote: wire.Addr{LID: 2, QPN: 7}}
	for _, tc := range []struct {
		subject string
		kind    wire.MsgKind
	}{
		{wire.ConnSubject(c), wire.KindConn},
		{wire.HostFindingSubject("host A.example"), wire.KindFinding},
		{"apmwatch.conn.0.host_A_example.d.0", wire.KindConn},
		{"apmwatch.conn.63.host_A_example.a-b_C.4294967295", wire.KindConn},
		{"apmwatch.conn.64.host_A_example.d.1", 0},         // no such partition
		{"apmwatch.conn.01.host_A_example.d.1", 0},         // not as the publisher writes it
		{"apmwatch.conn.1.host_A_example.d.01", 0},         // nor here
		{"apmwatch.conn.1.host_A_example.d.4294967296", 0}, // past a QPN
		{"apmwatch.conn.1.host_A_example.d.-1", 0},
		{"apmwatch.conn.1.host_A_example..1", 0},
		{"apmwatch.conn.1.host_A_example.d.e.1", 0},
		{"apmwatch.conn.1.host_A_example.d.*", 0},
		{"apmwatch.conn.1.host_A_example.>", 0},
		{"apmwatch.conn.1.hostB.d.1", 0}, // another host
		{"apmwatch.conn.1.host_A_example." + strings.Repeat("d", 65) + ".1", 0},
		{"apmwatch.finding.host.hostB", 0},
		{"apmwatch.finding.host.host_A_example.x", 0},
		{"apmwatch.finding.host.host_A_example ", 0},
		{"apmwatch.finding.fleet.3", 0}, // the fleet's, not a host's
		{"$JS.API.STREAM.DELETE.APMWATCH_CONN", 0},
		{"_INBOX.x", 0},
		{"", 0},
	} {
		kind, ok := wire.OwnSubject(tc.subject, "host A.example")
		if ok != (tc.kind != 0) || kind != tc.kind {
			t.Errorf("%q: %v %v, want %v", tc.subject, kind, ok, tc.kind)
		}
	}
}

// rawFrame frames m as the queue does, whatever its subject.
func rawFrame(m Msg) []byte {
	b, _ := json.Marshal(m)
	f := binary.LittleEndian.AppendUint32(nil, uint32(len(b)))
	f = binary.LittleEndian.AppendUint32(f, crc32.Checksum(b, crcTable))
	return append(f, b...)
}

// plant writes a segment of these messages in dir, as another writer
// than the publisher could have.
func plant(t *testing.T, dir string, ms ...Msg) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, m := range ms {
		b = append(b, rawFrame(m)...)
	}
	if err := os.WriteFile(filepath.Join(dir, "seg-000000000001"), b, 0o640); err != nil {
		t.Fatal(err)
	}
}

var planted = []Msg{
	{Subject: "$JS.API.STREAM.DELETE.APMWATCH_FINDINGS", ID: "x1"},
	{Subject: "apmwatch.finding.host.hostB", ID: "x2", Data: []byte(`{"host":"hostB"}`)},
	{Subject: "apmwatch.conn.3.hostB.mlx5_0.7", ID: "x3", Data: []byte(`{}`)},
	{Subject: "apmwatch.finding.fleet.3", ID: "x4", Data: []byte(`{}`)},
	{Subject: "apmwatch.conn.3.hostA.mlx5_0.>", ID: "x5", Data: []byte(`{}`)},
}

// A queue file can name any subject: only this host's subjects are
// handed out, the others are dropped and counted as corrupt.
func TestQueueHandsOutOnlyOwnSubjects(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	plant(t, dir, append([]Msg{findingMsg(0, 10)}, append(planted, connMsg(7, 0, 10))...)...)
	q, err := OpenQueue(dir, "hostA", MinQueueMax)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if got := strings.Join(ids(q), " "); got != "f0 c7-0" {
		t.Fatalf("handed out: %s", got)
	}
	if st := q.Stats(); st.Corrupt != uint64(len(planted)) || st.Pending != 2 {
		t.Fatalf("stats: %+v", st)
	}
	for _, m := range planted {
		if err := q.Append(m); err == nil {
			t.Errorf("%s queued", m.Subject)
		}
	}
	appendAll(t, q, findingMsg(1, 10))
	if got := strings.Join(ids(q), " "); got != "f0 c7-0 f1" {
		t.Fatalf("handed out: %s", got)
	}
	if st := q.Stats(); st.Corrupt != 2*uint64(len(planted)) {
		t.Fatalf("stats: %+v", st)
	}
}

// A frame changed under the open queue to another host's subject is
// skipped, counted once, and passed.
func TestQueueHandsOutOnlyOwnSubjectsWrittenUnderIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q, err := OpenQueue(dir, "hostA", MinQueueMax)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	appendAll(t, q, findingMsg(0, 10), findingMsg(1, 10))
	evil := findingMsg(0, 10)
	evil.Subject = wire.HostFindingSubject("hostB") // as long as hostA's
	f, _ := os.OpenFile(filepath.Join(dir, "seg-000000000001"), os.O_WRONLY, 0)
	f.WriteAt(rawFrame(evil), 0)
	f.Close()
	for range 2 {
		if got := strings.Join(ids(q), " "); got != "f1" {
			t.Fatalf("handed out: %s", got)
		}
	}
	if st := q.Stats(); st.Corrupt != 1 || st.Pending != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

// The queue's directory holds what the daemon sends in its own name: one
// that another user owns or may write to is refused.
func TestOpenQueueRefusesADirectoryAnotherUserMayWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	if q, err := OpenQueue(dir, "hostA", MinQueueMax); err == nil || !strings.Contains(err.Error(), "writable by others") {
		if q != nil {
			q.Close()
		}
		t.Fatalf("a directory writable by all: %v", err)
	}
	if os.Geteuid() != 0 {
		return
	}
	os.Chmod(dir, 0o750)
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if q, err := OpenQueue(dir, "hostA", MinQueueMax); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		if q != nil {
			q.Close()
		}
		t.Fatalf("another user's directory: %v", err)
	}
}

// End to end: messages planted in the queue directory (JetStream's API,
// another host's subject) never reach NATS; the host's own line does.
func TestPublisherNeverSendsAPlantedMessage(t *testing.T) {
	url := fleettest.NATS(t)
	dir := filepath.Join(t.TempDir(), "q")
	plant(t, dir, planted...)
	p, err := NewPublisher(PublishConfig{NATS: natsconn.NATSOptions{URL: url}, Host: "hostA", QueueDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	p.Line(findingline.New(apm.Finding{ID: 1, Kind: apm.MissedRearm}, "hostA"))
	fleettest.WaitFor(t, 20*time.Second, "hostA's line stored", func() bool {
		m, err := fleettest.TryStreamMsgs(url, wire.FindingsStream, wire.HostFindingSubject("hostA"))
		return err == nil && len(m) == 1
	})
	for _, f := range []string{"apmwatch.finding.>", "apmwatch.conn.>"} {
		stream := wire.FindingsStream
		if strings.HasPrefix(f, "apmwatch.conn") {
			stream = wire.ConnStream
		}
		if m, err := fleettest.TryStreamMsgs(url, stream, f); err != nil || len(m) != map[string]int{"apmwatch.finding.>": 1}[f] {
			t.Fatalf("%s: %d messages, %v", f, len(m), err)
		}
	}
	if st := p.q.Stats(); st.Corrupt != uint64(len(planted)) {
		t.Fatalf("stats: %+v", st)
	}
}
