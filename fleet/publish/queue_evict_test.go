package publish

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// connMsg is revision rev of the record of hostA's QP qpn; findingMsg is
// hostA's finding line i.
func connMsg(qpn, rev, size int) Msg {
	return Msg{Subject: fmt.Sprintf("apmwatch.conn.%d.hostA.mlx5_0.%d", qpn%wire.Partitions, qpn), ID: fmt.Sprintf("c%d-%d", qpn, rev),
		Data: []byte(strings.Repeat("c", size))}
}

func findingMsg(i, size int) Msg {
	return Msg{Subject: wire.HostFindingSubject("hostA"), ID: fmt.Sprintf("f%d", i), Data: []byte(strings.Repeat("f", size))}
}

func appendAll(t *testing.T, q *Queue, ms ...Msg) {
	t.Helper()
	for _, m := range ms {
		if err := q.Append(m); err != nil {
			t.Fatal(err)
		}
	}
}

// queued returns the IDs in the queue, in order, and checks that they
// keep the order they were appended in.
func queued(t *testing.T, q *Queue, order map[string]int) []string {
	t.Helper()
	msgs, _ := q.Peek(1 << 20)
	var ids []string
	for i, m := range msgs {
		if i > 0 && order[m.ID] <= order[msgs[i-1].ID] {
			t.Fatalf("%s after %s: the queue's order changed", m.ID, msgs[i-1].ID)
		}
		ids = append(ids, m.ID)
	}
	return ids
}

// A burst of connection records past the bound (NATS away during a
// storm) drops the records a newer one replaces first, then the oldest
// records; the finding lines stay.
func TestQueueEvictsReplacedRecordsThenRecordsNeverFindings(t *testing.T) {
	q, err := OpenQueue(t.TempDir(), "hostA", MinQueueMax)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	order := map[string]int{}
	add := func(m Msg) { order[m.ID] = len(order); appendAll(t, q, m) }
	const size = 1 << 10
	for i := range 20 {
		add(findingMsg(i, size))
	}
	for i := range 300 { // ends that changed once: each record is its end's last
		add(connMsg(1000+i, 0, size))
	}
	for rev := range 700 { // 10 ends changing all the time: 7 MiB
		for qpn := range 10 {
			add(connMsg(qpn, rev, size))
		}
		if rev == 350 {
			add(findingMsg(20, size))
		}
	}
	add(findingMsg(21, size))
	have := map[string]bool{}
	for _, id := range queued(t, q, order) {
		have[id] = true
	}
	for i := range 22 {
		if !have[fmt.Sprintf("f%d", i)] {
			t.Errorf("finding line %d dropped", i)
		}
	}
	for i := range 300 {
		if !have[fmt.Sprintf("c%d-0", 1000+i)] {
			t.Fatalf("the last record of QP %d dropped while replaced ones were queued", 1000+i)
		}
	}
	for qpn := range 10 {
		if !have[fmt.Sprintf("c%d-699", qpn)] {
			t.Errorf("the last record of QP %d dropped", qpn)
		}
	}
	st := q.Stats()
	if st.Bytes > MinQueueMax || st.DroppedFindings != 0 || st.DroppedConn == 0 || st.Dropped != st.DroppedConn ||
		uint64(st.Pending)+st.Dropped != uint64(len(order)) {
		t.Fatalf("stats: %+v (appended %d)", st, len(order))
	}
}

// With no record replaced, the oldest records go, still before any
// finding line.
func TestQueueEvictsTheOldestRecordsBeforeFindings(t *testing.T) {
	q, err := OpenQueue(t.TempDir(), "hostA", MinQueueMax)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	order := map[string]int{}
	add := func(m Msg) { order[m.ID] = len(order); appendAll(t, q, m) }
	const size = 1 << 10
	for i := range 50 {
		add(findingMsg(i, size))
	}
	n := 3 * MinQueueMax / size
	for i := range n {
		add(connMsg(i, 0, size))
	}
	ids := queued(t, q, order)
	if len(ids) < 50 || ids[0] != "f0" || ids[49] != "f49" || ids[len(ids)-1] != fmt.Sprintf("c%d-0", n-1) {
		t.Fatalf("queued %d: first %v last %s", len(ids), ids[:min(len(ids), 3)], ids[len(ids)-1])
	}
	if st := q.Stats(); st.DroppedFindings != 0 || st.Dropped != st.DroppedConn || uint64(st.Pending)+st.Dropped != uint64(len(order)) {
		t.Fatalf("stats: %+v", st)
	}
}

// What Peek handed out stays where it is while an eviction rewrites the
// segments: the Ack that follows moves the head exactly past it.
func TestQueueEvictsNothingPeekHandedOut(t *testing.T) {
	q, err := OpenQueue(t.TempDir(), "hostA", MinQueueMax)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	const size = 1 << 10
	for rev := range 10 { // sizes that differ: a moved frame does not fall where another was
		appendAll(t, q, connMsg(1, rev, size+rev*37))
	}
	appendAll(t, q, findingMsg(0, 3*size), findingMsg(1, size))
	msgs, pos := q.Peek(5)
	if len(msgs) != 5 {
		t.Fatalf("peek: %d", len(msgs))
	}
	for rev := 10; rev < 900; rev++ { // replaced, in the first segment
		appendAll(t, q, connMsg(1, rev, size))
	}
	for qpn := 2; qpn < 1200; qpn++ { // past the bound: the first segment is rewritten, but for revisions 0..4 on their way
		appendAll(t, q, connMsg(qpn, 0, size))
	}
	appendAll(t, q, connMsg(1, 900, size))
	if err := q.Ack(pos[4]); err != nil {
		t.Fatal(err)
	}
	msgs, _ = q.Peek(1 << 20)
	st := q.Stats()
	if len(msgs) < 3 || msgs[0].ID != "f0" || msgs[1].ID != "f1" || msgs[len(msgs)-1].ID != "c1-900" || st.Corrupt != 0 || st.DroppedConn == 0 {
		t.Fatalf("after the eviction: %d messages from %s, stats %+v", len(msgs), msgs[0].ID, st)
	}
}

// The audit's /metrics tells the two kinds of drop apart.
func TestQueueEvictsCountedByTypeInTheMetrics(t *testing.T) {
	p, err := NewPublisher(PublishConfig{NATS: natsconn.NATSOptions{URL: "nats://" + fleettest.FreePort(t)}, Host: "hostA",
		QueueDir: filepath.Join(t.TempDir(), "q"), QueueMax: MinQueueMax})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(0)
	appendAll(t, p.q, findingMsg(0, 1<<10))
	for qpn := range 3 * MinQueueMax >> 10 {
		appendAll(t, p.q, connMsg(qpn, 0, 1<<10))
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p)
	st := p.q.Stats()
	want := fmt.Sprintf(`# HELP apmwatch_publish_queue_lost_by_type_total Messages dropped from the publish queue past its bound, by type (conn: replaced records first, then the oldest; finding: only when no record is left).
# TYPE apmwatch_publish_queue_lost_by_type_total counter
apmwatch_publish_queue_lost_by_type_total{type="conn"} %d
apmwatch_publish_queue_lost_by_type_total{type="finding"} 0
`, st.DroppedConn)
	if st.DroppedConn == 0 {
		t.Fatalf("stats: %+v", st)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "apmwatch_publish_queue_lost_by_type_total"); err != nil {
		t.Fatal(err)
	}
}
