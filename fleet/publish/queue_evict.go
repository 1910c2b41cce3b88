package publish

import (
	"fmt"
	"hash/maphash"
	"io"
	"os"

	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/apmwatch/apmwatch/internal/outfile"
)

// evictSlack is how far below its bound an eviction that rewrites
// segments takes the queue: it runs once per eighth of the bound
// appended, not at every append.
const evictSlack = 8

// evictLocked brings the queue back within its bound. What goes, in
// order: the connection records a newer queued record of the same
// subject replaces (an end's last record is what the fleet needs), from
// the segments where they weigh at least an eighth, most first; then the
// connection records, oldest first; and finding lines, oldest segment
// first, only when nothing else is left. Dropping records rewrites the
// segments concerned (each at most once a phase, one in memory at a
// time), and adjacent small segments are merged, so that their number
// stays near the bound over the segment size. Messages Peek handed out
// stay in place until Ack passes them.
func (q *Queue) evictLocked() {
	if q.sizeLocked() <= q.max {
		return
	}
	target := q.max - q.max/evictSlack
	done := map[*segment]bool{}
	for q.sizeLocked() > target {
		var best *segment
		for _, s := range q.evictableLocked() {
			if !done[s] && s.stale > 0 && s.stale*8 >= s.bytes && (best == nil || s.stale > best.stale) {
				best = s
			}
		}
		if best == nil {
			break
		}
		done[best] = true
		if q.rewriteLocked(best, dropReplaced) != nil {
			break
		}
	}
	for _, s := range q.evictableLocked() {
		if q.sizeLocked() <= target {
			break
		}
		if s.conn > 0 && q.rewriteLocked(s, dropRecords) != nil {
			break
		}
	}
	q.mergeLocked()
	for q.sizeLocked() > q.max && len(q.segs) > 1 {
		q.dropOldestLocked()
	}
}

// What a rewrite drops.
const (
	dropReplaced = iota // connection records a newer one replaces
	dropRecords         // all connection records
)

// keptLocked is the place before which nothing moves: the head, or the
// end of what Peek handed out and Ack has not passed.
func (q *Queue) keptLocked() Pos {
	h, p := Pos{q.headSeg, q.headOff}, Pos{q.peekSeg, q.peekOff}
	if h.before(p) {
		return p
	}
	return h
}

// evictableLocked returns the segments a rewrite may touch: from the one
// holding keptLocked on.
func (q *Queue) evictableLocked() []*segment {
	return append([]*segment(nil), q.segs[q.indexLocked(q.keptLocked().seg):]...)
}

// rewriteLocked drops records of s past keptLocked (what: dropReplaced
// or dropRecords) by writing the rest to a new file renamed over it; its
// counters and the records' places follow.
func (q *Queue) rewriteLocked(s *segment, what int) error {
	b, err := q.load(s.n)
	if err != nil {
		return fmt.Errorf("publish queue: %w", err)
	}
	var prefix int64
	if k := q.keptLocked(); k.seg == s.n {
		prefix = min(k.off, int64(len(b)))
	}
	out := append(make([]byte, 0, len(b)), b[:prefix]...)
	msgs := 0
	for off := int64(0); off < prefix; {
		_, size, err := frameAt(b[:prefix], off)
		if err != nil {
			break
		}
		off += size
		msgs++
	}
	type move struct {
		h   uint64
		ref recordRef
		del bool
	}
	var moves []move
	var conn, stale int64
	var lostConn uint64
	off := prefix
	for off < int64(len(b)) {
		p, size, err := frameAt(b, off)
		if err != nil {
			out = append(out, b[off:]...) // left to Peek, which skips it
			break
		}
		kind, subject := q.kindOf(p)
		if kind != wire.KindConn {
			out = append(out, b[off:off+size]...)
			msgs++
			off += size
			continue
		}
		h := maphash.String(q.seed, subject)
		ref, ok := q.latest[h]
		mine := ok && ref.seg == s.n && ref.off == off
		if what == dropRecords || ok && !mine {
			lostConn++
			if mine {
				moves = append(moves, move{h: h, del: true})
			}
			off += size
			continue
		}
		if mine {
			moves = append(moves, move{h: h, ref: recordRef{s.n, int64(len(out)), size}})
		} else if ok {
			stale += size
		}
		conn += size
		out = append(out, b[off:off+size]...)
		msgs++
		off += size
	}
	if err := q.replaceLocked(s, out); err != nil {
		return err
	}
	for _, m := range moves {
		if m.del {
			delete(q.latest, m.h)
		} else {
			q.latest[m.h] = m.ref
		}
	}
	s.bytes, s.msgs, s.conn, s.stale = int64(len(out)), msgs, conn, stale
	q.dropped += lostConn
	q.droppedConn += lostConn
	return nil
}

// replaceLocked writes b as segment s (writeSegment); the writer
// follows the new file.
func (q *Queue) replaceLocked(s *segment, b []byte) error {
	if err := q.writeSegment(s.n, b); err != nil {
		return err
	}
	q.dirDirty = true
	q.closeReaderLocked()
	if q.w != nil && s == q.segs[len(q.segs)-1] {
		q.w.Close() // the file renamed over: Append opens the new one
		q.w = nil
		s.bytes = int64(len(b))
		if err := q.openWriter(s); err != nil {
			return err
		}
	}
	return nil
}

// writeSegment writes b as segment n: a new file, synced, renamed over
// the old one (a crash leaves one or the other).
func (q *Queue) writeSegment(n uint64, b []byte) error {
	tmp := q.path(n) + ".tmp"
	f, err := outfile.Create(tmp, os.O_TRUNC)
	if err != nil {
		return fmt.Errorf("publish queue: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, q.path(n))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("publish queue: %w", err)
	}
	return nil
}

// mergeLocked appends each small segment past keptLocked's to the one
// before it while both fit in one segment (the last one excepted: it
// takes appends).
func (q *Queue) mergeLocked() {
	for i := q.indexLocked(q.keptLocked().seg); i+2 < len(q.segs); {
		s, t := q.segs[i], q.segs[i+1]
		if s.bytes+t.bytes > segmentBytes {
			i++
			continue
		}
		if q.appendSegmentLocked(s, t) != nil {
			return
		}
		q.segs = append(q.segs[:i+1], q.segs[i+2:]...)
	}
}

// appendSegmentLocked appends segment t's file to s's, synced before t
// is deleted (a crash may leave t's messages twice, never none).
func (q *Queue) appendSegmentLocked(s, t *segment) error {
	b, err := q.load(t.n)
	if err != nil {
		return fmt.Errorf("publish queue: %w", err)
	}
	b = b[:min(int64(len(b)), t.bytes)]
	f, err := outfile.Create(q.path(s.n), 0)
	if err != nil {
		return fmt.Errorf("publish queue: %w", err)
	}
	if _, err = f.Seek(s.bytes, io.SeekStart); err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = syncFile(f)
	}
	if err != nil {
		f.Truncate(s.bytes)
		f.Close()
		return fmt.Errorf("publish queue: %w", err)
	}
	f.Close()
	os.Remove(q.path(t.n))
	q.dirDirty = true
	for h, r := range q.latest {
		if r.seg == t.n {
			q.latest[h] = recordRef{s.n, s.bytes + r.off, r.size}
		}
	}
	s.bytes += t.bytes
	s.msgs += t.msgs
	s.conn += t.conn
	s.stale += t.stale
	return nil
}

// dropOldestLocked deletes the oldest segment, counting its messages
// not yet acknowledged by kind.
func (q *Queue) dropOldestLocked() {
	s := q.segs[0]
	if s.n >= q.headSeg {
		from := int64(0)
		if s.n == q.headSeg {
			from = q.headOff
		}
		conn, other := q.tallyLocked(s, from)
		q.dropped += conn + other
		q.droppedConn += conn
		q.droppedFindings += other
	}
	q.removeFirstLocked()
	if q.headSeg <= s.n {
		q.headSeg, q.headOff = q.segs[0].n, 0
		if (Pos{q.peekSeg, q.peekOff}).before(Pos{q.headSeg, q.headOff}) {
			q.peekSeg, q.peekOff = q.headSeg, q.headOff
		}
		q.closeReaderLocked()
	}
}

// tallyLocked counts the messages of s from off: connection records and
// the others.
func (q *Queue) tallyLocked(s *segment, off int64) (conn, other uint64) {
	b, err := q.load(s.n)
	if err != nil {
		return 0, 0
	}
	b = b[:min(int64(len(b)), s.bytes)]
	for off < int64(len(b)) {
		p, size, err := frameAt(b, off)
		if err != nil {
			break
		}
		if kind, _ := q.kindOf(p); kind == wire.KindConn {
			conn++
		} else {
			other++
		}
		off += size
	}
	return conn, other
}
