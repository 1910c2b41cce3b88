package fleet

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/apmwatch/apmwatch/internal/outfile"
)

// Msg is one message waiting for NATS: its subject, its ID (JetStream
// drops a second publish of one ID within the stream's duplicate window,
// so a message sent again after a crash is stored once) and its body.
type Msg struct {
	Subject string `json:"s"`
	ID      string `json:"i"`
	Data    []byte `json:"d"`
}

// Queue is a bounded on-disk FIFO of messages: segment files of framed
// records (length, CRC-32C, JSON) and a head file naming the first
// message not yet acknowledged. Past its byte bound the oldest segment
// goes, and its messages are counted as dropped. Safe for concurrent use.
type Queue struct {
	dir     string
	max     int64
	mu      sync.Mutex
	segs    []*segment // oldest first; the last one takes appends
	w       *os.File
	headSeg uint64 // the segment and offset of the first unacknowledged message
	headOff int64
	r       *bufio.Reader // reads the head segment from headOff
	rf      *os.File
	dropped uint64
	corrupt uint64
}

type segment struct {
	n     uint64
	bytes int64
	msgs  int
}

// segmentBytes is where a segment is cut.
const segmentBytes = 1 << 20

// MinQueueMax is the smallest bound of a queue (two segments).
const MinQueueMax = 2 * segmentBytes

// maxFrame bounds one message (a finding line with its evidence).
const maxFrame = 1 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// OpenQueue opens (or creates) the queue in dir, bounded to max bytes.
func OpenQueue(dir string, max int64) (*Queue, error) {
	if max < MinQueueMax {
		return nil, fmt.Errorf("publish queue bound must be at least %d bytes: %d", MinQueueMax, max)
	}
	if err := outfile.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("publish queue: %w", err)
	}
	q := &Queue{dir: dir, max: max}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("publish queue: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "seg-") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(name, "seg-"), 10, 64)
		if err != nil {
			continue
		}
		s := &segment{n: n}
		s.bytes, s.msgs = q.scan(n)
		q.segs = append(q.segs, s)
	}
	slices.SortFunc(q.segs, func(a, b *segment) int { return int(a.n - b.n) })
	if b, err := os.ReadFile(filepath.Join(dir, "head")); err == nil {
		fmt.Sscanf(string(b), "%d %d", &q.headSeg, &q.headOff)
	}
	if len(q.segs) == 0 {
		q.segs = append(q.segs, &segment{n: 1})
	}
	if q.headSeg < q.segs[0].n {
		q.headSeg, q.headOff = q.segs[0].n, 0
	}
	last := q.segs[len(q.segs)-1]
	if q.headSeg > last.n {
		q.headSeg, q.headOff = last.n, last.bytes
	}
	if err := q.openWriter(last); err != nil {
		return nil, err
	}
	return q, nil
}

func (q *Queue) path(n uint64) string { return filepath.Join(q.dir, fmt.Sprintf("seg-%012d", n)) }

// scan measures a segment's whole frames (a torn tail from a crash is cut
// off when the segment is written again).
func (q *Queue) scan(n uint64) (int64, int) {
	f, err := os.Open(q.path(n))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var off int64
	msgs := 0
	for {
		size, err := readFrame(r, nil)
		if err != nil {
			return off, msgs
		}
		off += size
		msgs++
	}
}

func (q *Queue) openWriter(s *segment) error {
	f, err := outfile.Create(q.path(s.n), 0)
	if err != nil {
		return fmt.Errorf("publish queue: %w", err)
	}
	if err := f.Truncate(s.bytes); err != nil {
		f.Close()
		return fmt.Errorf("publish queue: %w", err)
	}
	if _, err := f.Seek(s.bytes, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("publish queue: %w", err)
	}
	q.w = f
	return nil
}

// readFrame reads one frame; with m it decodes the message. It returns the
// frame's size on disk.
func readFrame(r *bufio.Reader, m *Msg) (int64, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, err
	}
	n := binary.LittleEndian.Uint32(hdr[:4])
	if n == 0 || n > maxFrame {
		return 0, errCorrupt
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, err
	}
	if crc32.Checksum(b, crcTable) != binary.LittleEndian.Uint32(hdr[4:]) {
		return 0, errCorrupt
	}
	if m != nil {
		if err := json.Unmarshal(b, m); err != nil {
			return 0, errCorrupt
		}
	}
	return int64(8 + n), nil
}

var errCorrupt = errors.New("corrupt publish queue frame")

// Append adds a message at the tail. Past the bound the oldest segment is
// dropped (its messages counted).
func (q *Queue) Append(m Msg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("publish queue: %w", err)
	}
	if len(b) > maxFrame {
		return fmt.Errorf("publish queue: message of %d bytes", len(b))
	}
	frame := make([]byte, 8, 8+len(b))
	binary.LittleEndian.PutUint32(frame, uint32(len(b)))
	binary.LittleEndian.PutUint32(frame[4:], crc32.Checksum(b, crcTable))
	frame = append(frame, b...)
	q.mu.Lock()
	defer q.mu.Unlock()
	last := q.segs[len(q.segs)-1]
	if last.bytes >= segmentBytes {
		if err := q.w.Close(); err != nil {
			return fmt.Errorf("publish queue: %w", err)
		}
		last = &segment{n: last.n + 1}
		q.segs = append(q.segs, last)
		if err := q.openWriter(last); err != nil {
			return err
		}
	}
	if _, err := q.w.Write(frame); err != nil {
		q.w.Truncate(last.bytes) // whole frames only
		q.w.Seek(last.bytes, io.SeekStart)
		return fmt.Errorf("publish queue: %w", err)
	}
	last.bytes += int64(len(frame))
	last.msgs++
	for q.sizeLocked() > q.max && len(q.segs) > 1 {
		q.dropOldestLocked()
	}
	return nil
}

func (q *Queue) sizeLocked() int64 {
	var n int64
	for _, s := range q.segs {
		n += s.bytes
	}
	return n
}

func (q *Queue) dropOldestLocked() {
	s := q.segs[0]
	lost := s.msgs
	if q.headSeg == s.n {
		lost = q.countFromLocked(s, q.headOff)
	} else if q.headSeg > s.n {
		lost = 0
	}
	q.dropped += uint64(lost)
	os.Remove(q.path(s.n))
	q.segs = q.segs[1:]
	if q.headSeg <= s.n {
		q.headSeg, q.headOff = q.segs[0].n, 0
		q.closeReaderLocked()
	}
}

// countFromLocked counts the messages of s from off.
func (q *Queue) countFromLocked(s *segment, off int64) int {
	f, err := os.Open(q.path(s.n))
	if err != nil {
		return 0
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0
	}
	r := bufio.NewReader(f)
	n := 0
	for {
		if _, err := readFrame(r, nil); err != nil {
			return n
		}
		n++
	}
}

func (q *Queue) closeReaderLocked() {
	if q.rf != nil {
		q.rf.Close()
	}
	q.rf, q.r = nil, nil
}

// Pos is a place in the queue, returned by Peek for Ack.
type Pos struct {
	seg uint64
	off int64
}

// Peek returns up to n messages from the head, and the position after
// each of them.
func (q *Queue) Peek(n int) ([]Msg, []Pos) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var msgs []Msg
	var pos []Pos
	seg, off := q.headSeg, q.headOff
	for len(msgs) < n {
		if q.r == nil {
			f, err := os.Open(q.path(seg))
			if err != nil {
				return msgs, pos
			}
			if _, err := f.Seek(off, io.SeekStart); err != nil {
				f.Close()
				return msgs, pos
			}
			q.rf, q.r = f, bufio.NewReader(f)
		}
		var m Msg
		size, err := readFrame(q.r, &m)
		if err != nil {
			s := q.segment(seg)
			if s != nil && off < s.bytes && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				q.corrupt++ // skip the rest of a damaged segment
				off = s.bytes
			}
			if s == nil || seg == q.segs[len(q.segs)-1].n || off < s.bytes {
				q.closeReaderLocked() // read again next time (appends come)
				return msgs, pos
			}
			q.closeReaderLocked()
			seg, off = seg+1, 0
			continue
		}
		off += size
		msgs = append(msgs, m)
		pos = append(pos, Pos{seg, off})
	}
	q.closeReaderLocked()
	return msgs, pos
}

func (q *Queue) segment(n uint64) *segment {
	for _, s := range q.segs {
		if s.n == n {
			return s
		}
	}
	return nil
}

// Ack moves the head to p (messages before it were stored by NATS),
// deletes the segments wholly before it and records the head on disk.
func (q *Queue) Ack(p Pos) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if p.seg < q.headSeg || p.seg == q.headSeg && p.off <= q.headOff {
		return nil
	}
	q.headSeg, q.headOff = p.seg, p.off
	q.closeReaderLocked()
	for len(q.segs) > 1 && q.segs[0].n < q.headSeg {
		os.Remove(q.path(q.segs[0].n))
		q.segs = q.segs[1:]
	}
	if err := outfile.WriteFile(filepath.Join(q.dir, "head.tmp"), fmt.Appendf(nil, "%d %d\n", q.headSeg, q.headOff)); err != nil {
		return fmt.Errorf("publish queue head: %w", err)
	}
	if err := os.Rename(filepath.Join(q.dir, "head.tmp"), filepath.Join(q.dir, "head")); err != nil {
		return fmt.Errorf("publish queue head: %w", err)
	}
	return nil
}

// QueueStats are the queue's counters.
type QueueStats struct {
	Bytes   int64  // on disk, acknowledged or not
	Pending int    // messages not yet acknowledged
	Dropped uint64 // lost past the bound
	Corrupt uint64 // damaged segments skipped
}

// Stats returns the counters.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := QueueStats{Bytes: q.sizeLocked(), Dropped: q.dropped, Corrupt: q.corrupt}
	for _, s := range q.segs {
		switch {
		case s.n > q.headSeg:
			st.Pending += s.msgs
		case s.n == q.headSeg:
			st.Pending += q.countFromLocked(s, q.headOff)
		}
	}
	return st
}

// Close closes the files.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closeReaderLocked()
	if q.w != nil {
		err := q.w.Close()
		q.w = nil
		return err
	}
	return nil
}
