package publish

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/apmwatch/apmwatch/internal/outfile"
)

// recoverLocked reads the queue a crash (or anything) left in q.dir and
// makes it whole: messages not on this host's subjects are cut and
// counted as corrupt; segments wholly before the head were acknowledged and
// go; a head naming a missing segment resumes at the next one; a head
// past its segment's end resumes at the end, one within a frame at the
// next frame, one that does not parse at the oldest message (sent again:
// JetStream drops a message ID it holds). In each segment a damaged
// stretch (a torn last frame, a page the crash did not write) is skipped
// up to the next whole frame, counted as corrupt, and cut from the file.
func (q *Queue) recoverLocked() error {
	ents, err := os.ReadDir(q.dir)
	if err != nil {
		return fmt.Errorf("publish queue: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if name == "head.tmp" || strings.HasPrefix(name, "seg-") && strings.HasSuffix(name, ".tmp") {
			os.Remove(filepath.Join(q.dir, name)) // a write a crash interrupted
			continue
		}
		n, ok := segmentName(name)
		if ok && e.Type().IsRegular() {
			q.segs = append(q.segs, &segment{n: n})
		}
	}
	slices.SortFunc(q.segs, func(a, b *segment) int { return cmp.Compare(a.n, b.n) })
	stored, ok := q.readHead()
	if !ok { // from the oldest message (a new queue: its first segment)
		stored = Pos{1, 0}
		if len(q.segs) > 0 {
			stored.seg = q.segs[0].n
		}
	}
	head := stored
	for len(q.segs) > 0 && q.segs[0].n < head.seg {
		os.Remove(q.path(q.segs[0].n))
		q.segs = q.segs[1:]
	}
	if len(q.segs) == 0 {
		q.segs = append(q.segs, &segment{n: head.seg})
	}
	if q.segs[0].n != head.seg {
		head = Pos{q.segs[0].n, 0}
	}
	for _, s := range q.segs {
		from := int64(0)
		if s.n == head.seg {
			from = head.off
		}
		off, err := q.recoverSegment(s, from)
		if err != nil {
			return err
		}
		if s.n == head.seg {
			head.off = off
		}
	}
	q.headSeg, q.headOff = head.seg, head.off
	q.peekSeg, q.peekOff = head.seg, head.off
	q.dirDirty, q.headDirty = true, head != stored
	if err := q.openWriter(q.segs[len(q.segs)-1]); err != nil {
		return err
	}
	q.scheduleSyncLocked()
	return nil
}

// maxSegment bounds the segment a head file names (the numbers after it
// are taken by the segments cut later).
const maxSegment = 1 << 60

// segmentName parses a segment's file name, as path makes it.
func segmentName(name string) (uint64, bool) {
	n, err := strconv.ParseUint(strings.TrimPrefix(name, "seg-"), 10, 64)
	if err != nil || n == 0 || n > 2*maxSegment || name != fmt.Sprintf("seg-%012d", n) {
		return 0, false
	}
	return n, true
}

// readHead reads the head file: "SEGMENT OFFSET\n".
func (q *Queue) readHead() (Pos, bool) {
	f, err := os.OpenFile(filepath.Join(q.dir, "head"), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return Pos{}, false
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 64))
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return Pos{}, false
	}
	seg, err1 := strconv.ParseUint(fields[0], 10, 64)
	off, err2 := strconv.ParseInt(fields[1], 10, 64)
	if err1 != nil || err2 != nil || seg == 0 || seg > maxSegment || off < 0 {
		return Pos{}, false
	}
	return Pos{seg, off}, true
}

// resyncBudget bounds the checksum bytes a search for the next whole
// frame spends in one segment (past it the rest of the segment is lost).
const resyncBudget = 64 << 20

// recoverSegment reads segment s from off from (the head's offset in its
// segment, else 0), keeps its whole frames of well-formed messages, cuts
// what is damaged (rewriting the file, bytes before from untouched) and
// counts it. It returns where the first kept frame from from is.
func (q *Queue) recoverSegment(s *segment, from int64) (int64, error) {
	b, err := q.load(s.n)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = nil, nil
	}
	if err != nil {
		return 0, fmt.Errorf("publish queue: %w", err)
	}
	cut := false
	if len(b) > segFileMax {
		b, cut = b[:segFileMax], true
		q.corrupt++
	}
	from = min(from, int64(len(b)))
	out := b[:from:from] // b itself while nothing is cut
	budget := int64(resyncBudget)
	for off := from; off < int64(len(b)); {
		p, size, err := frameAt(b, off)
		if err == nil && !q.wellFormed(p) {
			err = errCorrupt
		}
		if err != nil {
			q.corrupt++
			cut = true
			off = nextFrame(b, off+1, &budget)
			continue
		}
		q.noteLocked(s, p, int64(len(out)), size)
		out = append(out, b[off:off+size]...)
		s.msgs++
		off += size
	}
	if cut {
		if err := q.writeSegment(s.n, out); err != nil {
			return 0, err
		}
	}
	s.bytes = int64(len(out))
	return from, nil
}

// wellFormed reports whether a frame's payload is a message Peek hands
// out: one that decodes, on a subject of this host's.
func (q *Queue) wellFormed(p []byte) bool {
	var m Msg
	if json.Unmarshal(p, &m) != nil {
		return false
	}
	_, ok := wire.OwnSubject(m.Subject, q.host)
	return ok
}

// nextFrame returns where the next whole frame at or after off starts in
// b (len(b) when none), spending at most *budget bytes on checksums.
func nextFrame(b []byte, off int64, budget *int64) int64 {
	end := int64(len(b))
	for ; off+8 < end; off++ {
		n := int64(binary.LittleEndian.Uint32(b[off:]))
		if n == 0 || n > maxFrame || n > end-off-8 || b[off+8] != '{' {
			continue
		}
		if *budget < n {
			return end
		}
		*budget -= n
		if crc32.Checksum(b[off+8:off+8+n], crcTable) == binary.LittleEndian.Uint32(b[off+4:]) {
			return off
		}
	}
	return end
}

// syncInterval is how often, at most, the queue reaches the disk.
const syncInterval = time.Second

// syncFile is (*os.File).Sync (a test counts the calls).
var syncFile = (*os.File).Sync

// scheduleSyncLocked makes syncLocked run at most syncInterval after the
// last one.
func (q *Queue) scheduleSyncLocked() {
	if q.timer != nil || q.closed {
		return
	}
	q.timer = time.AfterFunc(max(0, syncInterval-time.Since(q.lastSync)), func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.timer = nil
		if q.closed {
			return
		}
		if err := q.syncLocked(); err != nil {
			q.syncErr = err
		}
	})
}

// syncLocked writes the queue through to the disk: the segments written
// since the last time, then the head (never ahead of the messages it
// names) and the directory. A crash loses at most what came since: the
// messages appended (not yet sent), and the head's moves (the messages
// are sent again, and JetStream drops the IDs it holds).
func (q *Queue) syncLocked() error {
	q.lastSync = time.Now()
	var errs []error
	for _, f := range q.unsynced {
		errs = append(errs, syncFile(f), f.Close())
	}
	q.unsynced = nil
	if q.dataDirty && q.w != nil {
		errs = append(errs, syncFile(q.w))
	}
	q.dataDirty = false
	if q.headDirty {
		errs = append(errs, q.writeHead())
		q.headDirty, q.dirDirty = false, true
	}
	if q.dirDirty {
		errs = append(errs, syncDir(q.dir))
		q.dirDirty = false
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("publish queue sync: %w", err)
	}
	return nil
}

// writeHead writes the head file, synced, by a rename.
func (q *Queue) writeHead() error {
	tmp := filepath.Join(q.dir, "head.tmp")
	f, err := outfile.Create(tmp, os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%d %d\n", q.headSeg, q.headOff)
	if err == nil {
		err = syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(q.dir, "head"))
	}
	return err
}

// syncDir syncs a directory: the files created, renamed and removed in it.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return syncFile(d)
}
