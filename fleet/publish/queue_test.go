package publish

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/fleet/wire"
)

func fill(t *testing.T, q *Queue, from, n, size int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := q.Append(Msg{Subject: wire.HostFindingSubject("hostA"), ID: fmt.Sprint(i), Data: []byte(strings.Repeat("x", size))}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQueueResumesAfterReopenFromTheHead(t *testing.T) {
	dir := t.TempDir()
	q, err := OpenQueue(dir, "hostA", MinQueueMax)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, q, 0, 10, 10)
	msgs, pos := q.Peek(4)
	if len(msgs) != 4 || msgs[0].ID != "0" || msgs[3].ID != "3" {
		t.Fatalf("peek: %+v", msgs)
	}
	if err := q.Ack(pos[3]); err != nil {
		t.Fatal(err)
	}
	q.Close()
	// a torn frame at the tail (a crash mid-write) is cut off
	f, _ := os.OpenFile(filepath.Join(dir, "seg-000000000001"), os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte{200, 0, 0})
	f.Close()
	q, err = OpenQueue(dir, "hostA", MinQueueMax)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	fill(t, q, 10, 1, 10)
	msgs, _ = q.Peek(100)
	if len(msgs) != 7 || msgs[0].ID != "4" || msgs[6].ID != "10" {
		t.Fatalf("after reopen: %d messages %+v", len(msgs), msgs)
	}
	if st := q.Stats(); st.Pending != 7 || st.Dropped != 0 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestQueueDropsTheOldestPastItsBoundAndCountsThem(t *testing.T) {
	q, err := OpenQueue(t.TempDir(), "hostA", MinQueueMax)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	const size = 10 << 10
	n := 3 * MinQueueMax / size // three times what fits
	fill(t, q, 0, n, size)
	st := q.Stats()
	if st.Bytes > MinQueueMax || st.Dropped == 0 || st.DroppedFindings != st.Dropped || uint64(st.Pending)+st.Dropped != uint64(n) {
		t.Fatalf("stats: %+v (appended %d)", st, n)
	}
	msgs, _ := q.Peek(1)
	if len(msgs) != 1 || msgs[0].ID != fmt.Sprint(st.Dropped) {
		t.Fatalf("head after drops: %+v, dropped %d", msgs, st.Dropped)
	}
}
