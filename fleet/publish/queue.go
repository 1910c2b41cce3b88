package publish

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/apmwatch/apmwatch/fleet/wire"
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
// message not yet acknowledged. Past its byte bound it drops connection
// records before finding lines (evictLocked); it reaches the disk at
// most once a second (syncLocked) and recovers what a crash left when it
// opens (recoverLocked). Safe for concurrent use.
type Queue struct {
	dir     string
	host    string // the subjects it holds are this host's (wire.OwnSubject)
	max     int64
	mu      sync.Mutex
	segs    []*segment // oldest first; the last one takes appends
	w       *os.File
	headSeg uint64 // the segment and offset of the first unacknowledged message
	headOff int64
	peekSeg uint64 // the end of what Peek handed out: nothing before it moves until Ack passes it
	peekOff int64
	r       *bufio.Reader // reads the head segment from headOff
	rf      *os.File
	// latest is, per connection subject (hashed), where its newest
	// queued record is: an older one of the same subject is replaced.
	latest          map[uint64]recordRef
	seed            maphash.Seed
	dropped         uint64
	droppedConn     uint64
	droppedFindings uint64
	corrupt         uint64
	damaged         Pos // the last damaged place counted
	// What syncLocked writes through, at most once a second.
	lastSync            time.Time
	timer               *time.Timer
	dataDirty, dirDirty bool
	headDirty           bool
	unsynced            []*os.File // segments cut since, to sync and close
	syncErr             error
	closed              bool
}

type segment struct {
	n     uint64
	bytes int64
	msgs  int
	conn  int64 // bytes of connection records eviction may drop
	stale int64 // of those, the bytes of records a newer one replaces
}

// recordRef is where a connection record is.
type recordRef struct {
	seg       uint64
	off, size int64
}

// segmentBytes is where a segment is cut.
const segmentBytes = 1 << 20

// MinQueueMax is the smallest bound of a queue (two segments).
const MinQueueMax = 2 * segmentBytes

// maxFrame bounds one message (a finding line with its evidence).
const maxFrame = 1 << 20

// segFileMax bounds a segment file: it is cut once past segmentBytes, so
// its last frame starts before that.
const segFileMax = segmentBytes + 8 + maxFrame

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// OpenQueue opens (or creates) the queue in dir of the messages of the
// host named host, bounded to max bytes, recovering what a crash left
// (recoverLocked). What the queue holds is sent in the host's name: dir
// must be this user's and writable by no one else (outfile.OwnDir), and
// only the host's own subjects go in or come out (wire.OwnSubject).
func OpenQueue(dir, host string, max int64) (*Queue, error) {
	if max < MinQueueMax {
		return nil, fmt.Errorf("publish queue bound must be at least %d bytes: %d", MinQueueMax, max)
	}
	if err := outfile.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("publish queue: %w", err)
	}
	if err := outfile.OwnDir(dir); err != nil {
		return nil, fmt.Errorf("publish queue: %w", err)
	}
	q := &Queue{dir: dir, host: host, max: max, latest: map[uint64]recordRef{}, seed: maphash.MakeSeed(), lastSync: time.Now()}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.recoverLocked(); err != nil {
		return nil, err
	}
	return q, nil
}

func (q *Queue) path(n uint64) string { return filepath.Join(q.dir, fmt.Sprintf("seg-%012d", n)) }

// noteLocked counts a frame of s at off: a connection record replaces
// the one of its subject queued before it.
func (q *Queue) noteLocked(s *segment, payload []byte, off, size int64) {
	kind, subject := q.kindOf(payload)
	if kind != wire.KindConn {
		return
	}
	s.conn += size
	h := maphash.String(q.seed, subject)
	if prev, ok := q.latest[h]; ok {
		if ps := q.segment(prev.seg); ps != nil {
			ps.stale += prev.size
		}
	}
	q.latest[h] = recordRef{s.n, off, size}
}

// load reads segment n whole (up to segFileMax bytes), never through a
// symbolic link.
func (q *Queue) load(n uint64) ([]byte, error) {
	f, err := os.OpenFile(q.path(n), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, segFileMax+1))
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

// frameAt returns the payload of the frame at b[off:] and the frame's
// size: io.ErrUnexpectedEOF when it runs past the end of b.
func frameAt(b []byte, off int64) ([]byte, int64, error) {
	rest := b[off:]
	if len(rest) < 8 {
		return nil, 0, io.ErrUnexpectedEOF
	}
	n := int64(binary.LittleEndian.Uint32(rest))
	if n == 0 || n > maxFrame {
		return nil, 0, errCorrupt
	}
	if int64(len(rest))-8 < n {
		return nil, 0, io.ErrUnexpectedEOF
	}
	p := rest[8 : 8+n]
	if crc32.Checksum(p, crcTable) != binary.LittleEndian.Uint32(rest[4:]) {
		return nil, 0, errCorrupt
	}
	return p, 8 + n, nil
}

// kindOf decodes the subject of a frame's message and tells its kind (0:
// not a message of this host's).
func (q *Queue) kindOf(payload []byte) (wire.MsgKind, string) {
	var m struct {
		S string `json:"s"`
	}
	if err := json.Unmarshal(payload, &m); err != nil {
		return 0, ""
	}
	kind, _ := wire.OwnSubject(m.S, q.host)
	return kind, m.S
}

var errCorrupt = errors.New("corrupt publish queue frame")

// errNotOwnSubject refuses a message on a subject that is not this host's.
var errNotOwnSubject = errors.New("not a subject of this host")

// Append adds a message at the tail; past the bound the queue evicts
// (evictLocked). A message on a subject that is not this host's is
// refused and counted as corrupt.
func (q *Queue) Append(m Msg) error {
	if _, ok := wire.OwnSubject(m.Subject, q.host); !ok {
		q.mu.Lock()
		q.corrupt++
		q.mu.Unlock()
		return fmt.Errorf("publish queue: %q: %w", m.Subject, errNotOwnSubject)
	}
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
	if q.w == nil { // a rewrite could not open it again
		if err := q.openWriter(last); err != nil {
			return err
		}
	}
	if last.bytes >= segmentBytes {
		cut := q.w
		next := &segment{n: last.n + 1}
		if err := q.openWriter(next); err != nil {
			return err
		}
		q.unsynced = append(q.unsynced, cut) // synced, then closed, by syncLocked
		q.segs = append(q.segs, next)
		q.dirDirty = true
		last = next
	}
	if _, err := q.w.Write(frame); err != nil {
		q.w.Truncate(last.bytes) // whole frames only
		q.w.Seek(last.bytes, io.SeekStart)
		return fmt.Errorf("publish queue: %w", err)
	}
	q.noteLocked(last, b, last.bytes, int64(len(frame)))
	last.bytes += int64(len(frame))
	last.msgs++
	q.dataDirty = true
	q.evictLocked()
	q.scheduleSyncLocked()
	return nil
}

func (q *Queue) sizeLocked() int64 {
	var n int64
	for _, s := range q.segs {
		n += s.bytes
	}
	return n
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

func (p Pos) before(o Pos) bool { return p.seg < o.seg || p.seg == o.seg && p.off < o.off }

// Peek returns up to n messages from the head, and the position after
// each of them. Until Ack passes them, eviction keeps them in place.
func (q *Queue) Peek(n int) ([]Msg, []Pos) {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.closeReaderLocked()
	var msgs []Msg
	var pos []Pos
	seg, off := q.headSeg, q.headOff
	i := q.indexLocked(seg)
loop:
	for len(msgs) < n && i < len(q.segs) {
		s := q.segs[i]
		if s.n != seg { // the next segment (numbers have gaps where segments merged)
			seg, off = s.n, 0
		}
		last := i == len(q.segs)-1
		if off >= s.bytes && !last {
			q.closeReaderLocked()
			i++
			continue
		}
		if q.r == nil {
			f, err := os.OpenFile(q.path(seg), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
			if err == nil {
				if _, err = f.Seek(off, io.SeekStart); err != nil {
					f.Close()
				}
			}
			if err != nil {
				if last {
					break loop
				}
				i++
				continue
			}
			q.rf, q.r = f, bufio.NewReader(io.LimitReader(f, max(0, s.bytes-off))) // what the queue wrote, nothing after
		}
		var m Msg
		size, err := readFrame(q.r, &m)
		if err != nil {
			q.closeReaderLocked()
			if off < s.bytes { // a damaged frame: skip the rest of the segment
				q.damagedLocked(Pos{seg, off})
				off = s.bytes
				if len(msgs) == 0 {
					q.passLocked(Pos{seg, off})
				}
				continue
			}
			if last {
				break loop // read again next time (appends come)
			}
			i++
			continue
		}
		at := Pos{seg, off}
		off += size
		if _, ok := wire.OwnSubject(m.Subject, q.host); !ok { // never sent
			q.damagedLocked(at)
			if len(msgs) == 0 {
				q.passLocked(Pos{seg, off})
			}
			continue
		}
		msgs = append(msgs, m)
		pos = append(pos, Pos{seg, off})
	}
	if len(pos) > 0 && (Pos{q.peekSeg, q.peekOff}).before(pos[len(pos)-1]) {
		q.peekSeg, q.peekOff = pos[len(pos)-1].seg, pos[len(pos)-1].off
	}
	return msgs, pos
}

// damagedLocked counts a damaged place of the queue once, however many
// times Peek reads it before Ack passes it.
func (q *Queue) damagedLocked(p Pos) {
	if q.damaged.before(p) {
		q.corrupt++
		q.damaged = p
	}
}

// passLocked moves the head past what Peek skipped at the head (nothing
// there is ever sent).
func (q *Queue) passLocked(p Pos) {
	if !(Pos{q.headSeg, q.headOff}).before(p) {
		return
	}
	q.headSeg, q.headOff = p.seg, p.off
	if (Pos{q.peekSeg, q.peekOff}).before(p) {
		q.peekSeg, q.peekOff = p.seg, p.off
	}
	q.headDirty = true
	q.scheduleSyncLocked()
}

// indexLocked returns the index of the first segment numbered n or more.
func (q *Queue) indexLocked(n uint64) int {
	i, _ := slices.BinarySearchFunc(q.segs, n, func(s *segment, n uint64) int { return cmp.Compare(s.n, n) })
	return i
}

func (q *Queue) segment(n uint64) *segment {
	if i := q.indexLocked(n); i < len(q.segs) && q.segs[i].n == n {
		return q.segs[i]
	}
	return nil
}

// Ack moves the head to p (messages before it were stored by NATS) and
// deletes the segments wholly before it; the head reaches the disk with
// the next sync. It returns the last sync's error, if any.
func (q *Queue) Ack(p Pos) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !(Pos{q.headSeg, q.headOff}).before(p) {
		return nil
	}
	q.headSeg, q.headOff = p.seg, p.off
	if (Pos{q.peekSeg, q.peekOff}).before(p) {
		q.peekSeg, q.peekOff = p.seg, p.off
	}
	q.closeReaderLocked()
	for len(q.segs) > 1 && q.segs[0].n < q.headSeg {
		q.removeFirstLocked()
	}
	q.headDirty = true
	q.scheduleSyncLocked()
	err := q.syncErr // the last sync's, reported once
	q.syncErr = nil
	return err
}

// removeFirstLocked deletes the oldest segment and forgets its records.
func (q *Queue) removeFirstLocked() {
	s := q.segs[0]
	os.Remove(q.path(s.n))
	q.dirDirty = true
	q.segs = q.segs[1:]
	for h, r := range q.latest {
		if r.seg == s.n {
			delete(q.latest, h)
		}
	}
}

// QueueStats are the queue's counters.
type QueueStats struct {
	Bytes           int64  // on disk, acknowledged or not
	Pending         int    // messages not yet acknowledged
	Dropped         uint64 // lost past the bound, all kinds
	DroppedConn     uint64 // of those, connection records
	DroppedFindings uint64 // of those, finding lines
	Corrupt         uint64 // damaged stretches skipped (a crash's torn frame, a damaged page), and messages not on this host's subjects
}

// Stats returns the counters.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := QueueStats{Bytes: q.sizeLocked(), Dropped: q.dropped, DroppedConn: q.droppedConn,
		DroppedFindings: q.droppedFindings, Corrupt: q.corrupt}
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

// Close writes the queue and its head through to the disk and closes
// the files.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	q.closeReaderLocked()
	err := q.syncLocked()
	if q.w != nil {
		if cerr := q.w.Close(); err == nil {
			err = cerr
		}
		q.w = nil
	}
	return err
}
