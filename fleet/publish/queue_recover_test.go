package publish

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func openQ(t *testing.T, dir string, max int64) *Queue {
	t.Helper()
	q, err := OpenQueue(dir, "hostA", max)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// ids returns the IDs of every message in the queue, in order.
func ids(q *Queue) []string {
	msgs, _ := q.Peek(1 << 20)
	var out []string
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return out
}

// ackAll acknowledges every message in the queue.
func ackAll(t *testing.T, q *Queue) {
	t.Helper()
	if _, pos := q.Peek(1 << 20); len(pos) > 0 {
		if err := q.Ack(pos[len(pos)-1]); err != nil {
			t.Fatal(err)
		}
	}
}

// After a crash the head file may name a place the segments do not have
// (it was written, the segment's tail was not): new messages still flow.
func TestQueueRecoversAHeadPastTheEnd(t *testing.T) {
	for _, head := range []string{"1 999999\n", "1 -100\n", "1 5\n", "9 0\n", "garbage"} {
		t.Run(strings.TrimSpace(head), func(t *testing.T) {
			dir := t.TempDir()
			q := openQ(t, dir, MinQueueMax)
			appendAll(t, q, findingMsg(0, 10), findingMsg(1, 10), findingMsg(2, 10))
			ackAll(t, q)
			q.Close()
			if err := os.WriteFile(filepath.Join(dir, "head"), []byte(head), 0o600); err != nil {
				t.Fatal(err)
			}
			q = openQ(t, dir, MinQueueMax)
			defer q.Close()
			appendAll(t, q, findingMsg(3, 10))
			got := ids(q)
			if len(got) == 0 || got[len(got)-1] != "f3" {
				t.Fatalf("after reopen: %v", got)
			}
			ackAll(t, q)
			if st := q.Stats(); st.Pending != 0 {
				t.Fatalf("stats: %+v", st)
			}
		})
	}
}

// frameBytes is the frame of m as the queue writes it.
func frameBytes(m Msg) []byte {
	b, _ := json.Marshal(m)
	f := binary.LittleEndian.AppendUint32(nil, uint32(len(b)))
	f = binary.LittleEndian.AppendUint32(f, crc32.Checksum(b, crcTable))
	return append(f, b...)
}

// A crash tears the last frame (its header written, not all its body):
// it is cut off and counted, and new messages follow the whole ones.
func TestQueueRecoversATornLastFrame(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, dir, MinQueueMax)
	appendAll(t, q, findingMsg(0, 10), findingMsg(1, 10))
	q.Close()
	torn := frameBytes(findingMsg(2, 500))
	f, _ := os.OpenFile(filepath.Join(dir, "seg-000000000001"), os.O_APPEND|os.O_WRONLY, 0)
	f.Write(torn[:100])
	f.Close()
	q = openQ(t, dir, MinQueueMax)
	appendAll(t, q, findingMsg(3, 10))
	if got := strings.Join(ids(q), " "); got != "f0 f1 f3" {
		t.Fatalf("after reopen: %s", got)
	}
	if st := q.Stats(); st.Corrupt != 1 || st.Pending != 3 {
		t.Fatalf("stats: %+v", st)
	}
	q.Close()
	q = openQ(t, dir, MinQueueMax) // cut once, counted once
	defer q.Close()
	if st := q.Stats(); st.Corrupt != 0 || st.Pending != 3 {
		t.Fatalf("stats after a second reopen: %+v", st)
	}
}

// A damaged frame within a segment (a page the crash did not write) is
// skipped and counted; the queue resumes at the next whole frame.
func TestQueueRecoversAtTheNextFrameAfterADamagedOne(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, dir, MinQueueMax)
	var off int64
	for i := range 10 {
		if i == 3 {
			off = q.segs[0].bytes
		}
		appendAll(t, q, findingMsg(i, 100))
	}
	q.Close()
	f, _ := os.OpenFile(filepath.Join(dir, "seg-000000000001"), os.O_WRONLY, 0)
	f.WriteAt(make([]byte, 50), off+20) // zeros in frame 3
	f.Close()
	q = openQ(t, dir, MinQueueMax)
	defer q.Close()
	appendAll(t, q, findingMsg(10, 100))
	if got := strings.Join(ids(q), " "); got != "f0 f1 f2 f4 f5 f6 f7 f8 f9 f10" {
		t.Fatalf("after reopen: %s", got)
	}
	if st := q.Stats(); st.Corrupt != 1 || st.Pending != 10 {
		t.Fatalf("stats: %+v", st)
	}
}

// A segment missing between others (deleted, or lost to a crash) is
// passed over.
func TestQueueRecoversAMissingSegment(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, dir, 4*MinQueueMax)
	const size = 100 << 10
	n := 0
	for len(q.segs) < 3 || q.segs[2].bytes < size {
		appendAll(t, q, findingMsg(n, size))
		n++
	}
	inSecond := q.segs[1].msgs
	q.Close()
	os.Remove(filepath.Join(dir, "seg-000000000002"))
	q = openQ(t, dir, 4*MinQueueMax)
	defer q.Close()
	appendAll(t, q, findingMsg(n, 10))
	got := ids(q)
	if len(got) != n+1-inSecond || got[len(got)-1] != fmt.Sprintf("f%d", n) {
		t.Fatalf("after reopen: %d messages of %d (%d lost with the segment), last %s", len(got), n+1, inSecond, got[len(got)-1])
	}
}

// The segments and the head reach the disk at most once a second, and
// at Close: a crash loses at most the last second.
func TestQueueSyncsAtMostOnceASecondAndOnClose(t *testing.T) {
	var mu sync.Mutex
	synced := map[string]int{}
	old := syncFile
	syncFile = func(f *os.File) error {
		mu.Lock()
		synced[strings.TrimSuffix(filepath.Base(f.Name()), ".tmp")]++
		mu.Unlock()
		return old(f)
	}
	defer func() { syncFile = old }()
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return synced[name]
	}
	dir := t.TempDir()
	q := openQ(t, dir, MinQueueMax)
	start := time.Now()
	for i := range 200 {
		appendAll(t, q, findingMsg(i, 100))
	}
	if time.Since(start) < 800*time.Millisecond && count("seg-000000000001") != 0 {
		t.Fatalf("synced within the second: %v", synced)
	}
	fleettest.WaitFor(t, 3*time.Second, "the segment synced", func() bool { return count("seg-000000000001") == 1 })
	ackAll(t, q)
	q.mu.Lock()
	want := fmt.Sprintf("%d %d\n", q.headSeg, q.headOff)
	q.mu.Unlock()
	fleettest.WaitFor(t, 3*time.Second, "the head on disk", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "head"))
		return string(b) == want
	})
	if count("head") != 1 {
		t.Fatalf("head synced %d times", count("head"))
	}
	time.Sleep(1200 * time.Millisecond) // nothing new: nothing synced
	if count("seg-000000000001") != 1 || count("head") != 1 {
		t.Fatalf("synced with nothing new: %v", synced)
	}
	appendAll(t, q, findingMsg(200, 100))
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if count("seg-000000000001") != 2 {
		t.Fatalf("not synced at close: %v", synced)
	}
}

// What the recovery skipped shows in the audit's /metrics.
func TestQueueRecoveredCorruptInTheMetrics(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q := openQ(t, dir, MinQueueMax)
	appendAll(t, q, findingMsg(0, 10))
	q.Close()
	f, _ := os.OpenFile(filepath.Join(dir, "seg-000000000001"), os.O_APPEND|os.O_WRONLY, 0)
	f.Write(frameBytes(findingMsg(1, 500))[:100])
	f.Close()
	p, err := NewPublisher(PublishConfig{NATS: natsconn.NATSOptions{URL: "nats://" + fleettest.FreePort(t)}, Host: "hostA", QueueDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(0)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p)
	want := `# HELP apmwatch_publish_queue_corrupt_total Damaged stretches of the publish queue skipped (a crash's torn frame, a page not written).
# TYPE apmwatch_publish_queue_corrupt_total counter
apmwatch_publish_queue_corrupt_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "apmwatch_publish_queue_corrupt_total"); err != nil {
		t.Fatal(err)
	}
}

// A segment cut is synced once the next one takes the appends, and the
// directory that names the new one with it.
func TestQueueSyncsACutSegmentAndItsDirectory(t *testing.T) {
	var mu sync.Mutex
	synced := map[string]int{}
	old := syncFile
	syncFile = func(f *os.File) error {
		mu.Lock()
		synced[f.Name()]++
		mu.Unlock()
		return old(f)
	}
	defer func() { syncFile = old }()
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return synced[name]
	}
	dir := t.TempDir()
	first, second := filepath.Join(dir, "seg-000000000001"), filepath.Join(dir, "seg-000000000002")
	q := openQ(t, dir, MinQueueMax)
	defer q.Close()
	appendAll(t, q, findingMsg(0, 100))
	fleettest.WaitFor(t, 3*time.Second, "the first sync", func() bool { return count(first) == 1 && count(dir) == 1 })
	for i := 1; ; i++ {
		appendAll(t, q, findingMsg(i, 10<<10))
		if _, err := os.Stat(second); err == nil {
			break
		}
	}
	fleettest.WaitFor(t, 3*time.Second, "the new segment synced", func() bool { return count(second) == 1 })
	q.mu.Lock() // the rest of that sync, which holds the lock
	q.mu.Unlock()
	if count(first) != 2 || count(dir) != 2 {
		t.Fatalf("synced: %v", synced)
	}
}
