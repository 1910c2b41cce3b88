package publish

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/wire"
)

// FuzzQueueSegment opens a queue whose first two segments and head file
// are arbitrary bytes (a crash's leftovers, another writer's plants) and
// drains it: it never fails to open nor panics, hands out only messages
// of this host's subjects and no more than the files held, ends, still
// takes and hands out a new message, and a second open of what it left
// finds it whole (nothing more to skip, nothing left to send).
func FuzzQueueSegment(f *testing.F) {
	sync := syncFile
	syncFile = func(*os.File) error { return nil } // what reaches the disk is TestQueueSyncs's
	f.Cleanup(func() { syncFile = sync })
	f.Fuzz(func(t *testing.T, seg1, seg2, head []byte) {
		dir := filepath.Join(t.TempDir(), "q")
		if err := os.Mkdir(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"seg-000000000001": seg1, "seg-000000000002": seg2, "head": head} {
			if len(b) > 0 {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o640); err != nil {
					t.Fatal(err)
				}
			}
		}
		q, err := OpenQueue(dir, "hostA", MinQueueMax)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer q.Close()
		in := len(seg1) + len(seg2)
		if st := q.Stats(); st.Bytes > int64(in) {
			t.Fatalf("%d bytes from %d", st.Bytes, in)
		}
		out := 0
		for batches := 0; ; batches++ {
			msgs, pos := q.Peek(16)
			if len(msgs) == 0 {
				break
			}
			if batches > in/16+1 { // a frame takes more than 8 bytes
				t.Fatalf("%d batches from %d bytes: the queue does not end", batches, in)
			}
			for _, m := range msgs {
				if _, ok := wire.OwnSubject(m.Subject, "hostA"); !ok {
					t.Fatalf("handed out %q", m.Subject)
				}
				out += len(m.Subject) + len(m.ID) + len(m.Data)
			}
			if err := q.Ack(pos[len(pos)-1]); err != nil {
				t.Fatal(err)
			}
		}
		if out > in {
			t.Fatalf("handed out %d bytes from %d", out, in)
		}
		if err := q.Append(findingMsg(0, 10)); err != nil {
			t.Fatal(err)
		}
		msgs, pos := q.Peek(16)
		if len(msgs) != 1 || msgs[0].ID != "f0" {
			t.Fatalf("a new message: %+v", msgs)
		}
		if err := q.Ack(pos[0]); err != nil {
			t.Fatal(err)
		}
		if st := q.Stats(); st.Pending != 0 {
			t.Fatalf("stats: %+v", st)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		q, err = OpenQueue(dir, "hostA", MinQueueMax)
		if err != nil {
			t.Fatalf("open again: %v", err)
		}
		defer q.Close()
		if msgs, _ := q.Peek(16); len(msgs) != 0 || q.Stats().Corrupt != 0 {
			t.Fatalf("open again: %d messages, stats %+v", len(msgs), q.Stats())
		}
	})
}

// What the fuzzer's small inputs do not reach: segments built to cost the
// most. A segment file of 1 GiB is read up to a segment's bound; one
// where a plausible frame header starts every 4 bytes (each would cost
// half a MiB of checksum) gives up at the resync budget. Either opens in
// well under a second and a few MiB.
func TestQueueSegmentRecoveryIsBounded(t *testing.T) {
	pattern := make([]byte, segFileMax)
	for i := 0; i+4 <= len(pattern); i += 4 {
		copy(pattern[i:], []byte{'{', 0x41, 0x08, 0x00}) // a length of 0x08417b, '{' 8 bytes on
	}
	for name, mk := range map[string]func(string) error{
		"sparse 1 GiB": func(p string) error {
			f, err := os.Create(p)
			if err == nil {
				err = f.Truncate(1 << 30)
				f.Close()
			}
			return err
		},
		"a header every 4 bytes": func(p string) error { return os.WriteFile(p, pattern, 0o640) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "q")
			os.Mkdir(dir, 0o750)
			if err := mk(filepath.Join(dir, "seg-000000000001")); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, "seg-000000000002"), rawFrame(findingMsg(0, 10)), 0o640)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			q, err := OpenQueue(dir, "hostA", MinQueueMax)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			if alloc := after.TotalAlloc - before.TotalAlloc; took > 2*time.Second || alloc > 32<<20 {
				t.Fatalf("open took %v and %d MiB", took, alloc>>20)
			}
			if got := ids(q); len(got) != 1 || got[0] != "f0" || q.Stats().Corrupt == 0 {
				t.Fatalf("after open: %v, stats %+v", got, q.Stats())
			}
		})
	}
}
