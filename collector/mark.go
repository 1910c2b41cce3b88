package collector

import (
	"time"

	"github.com/apmwatch/apmwatch/internal/boottime"
	"github.com/cilium/ebpf"
)

// Watermarks. A record's Boot stamp is taken in the probe before the
// record is reserved in the ring buffer (except fexit on ib_cm_notify,
// which reserves first), and records from different CPUs
// reach the ring in the order they reserve. So once the reader finds the
// ring empty at CLOCK_BOOTTIME t (nothing reserved and not yet read: the
// producer and consumer positions are equal), every record stamped before
// t has been read, except:
//   - a probe between its stamp and its reserve: a few microseconds of
//     BPF with preemption off (kprobes) or migration off (BPF trampolines);
//     markSlack covers it, unless the kernel preempts a trampoline's
//     program there (full or lazy preemption, 7.2's default): its record
//     then comes after the mark, late;
//   - an entry waiting for its exit in the join map (the LAP/APR
//     handlers, the kprobe variants of ib_cm_notify, modify and destroy;
//     ib_cm_notify's fexit stamps its own record at the exit) or in the
//     modify entry map (fentry/fexit on ib_modify_qp*): the record is
//     stamped at the entry and reaches the ring at the exit, any time
//     later (a firmware command may block for a minute); the mark stays
//     below the oldest such entry.
//
// Anything stamped before a mark that still arrives is a late input for
// the model (counted in its Stats.Late and judged at its own stamp).
const markSlack = time.Millisecond

// markAt returns a watermark for the ring as it is now, or 0 when the ring
// is not empty. Only the reading goroutine calls it.
func (c *Collector) markAt() uint64 {
	now := boottime.Now()
	if now <= uint64(markSlack) {
		return 0
	}
	mark := now - uint64(markSlack)
	if oldest, ok := oldestInflight(c.loader.shared["inflight"]); ok && oldest <= mark {
		mark = oldest
	}
	if oldest, ok := oldestEntry(c.loader.shared["modify_at"], now); ok && oldest <= mark {
		mark = oldest
	}
	if c.reader.AvailableBytes() != 0 || mark == 0 {
		return 0 // records came in meanwhile: read them first
	}
	return mark
}

// oldestInflight is the smallest Boot stamp among the entries waiting for
// their exit. An empty map costs one syscall.
func oldestInflight(m *ebpf.Map) (uint64, bool) {
	if m == nil {
		return 0, false
	}
	var (
		key   apmJoinKey
		rec   apmApmRecord
		found bool
		min   uint64
	)
	it := m.Iterate()
	for it.Next(&key, &rec) {
		if rec.BootNs != 0 && (!found || rec.BootNs < min) {
			min, found = rec.BootNs, true
		}
	}
	if it.Err() != nil {
		return 1, true // cannot tell: no mark past anything
	}
	return min, found
}

// entryStale is the age past which an entry in modify_at is not a call in
// progress but one whose exit was never seen (its fexit detached first):
// the firmware's command timeout (mlx5: 60 s) with room to spare.
const entryStale = 2 * time.Minute

// oldestEntry is the smallest entry stamp of the modify calls in
// progress (map modify_at: join key to struct apm_modify_entry) at now.
func oldestEntry(m *ebpf.Map, now uint64) (uint64, bool) {
	if m == nil {
		return 0, false
	}
	var (
		key   apmJoinKey
		e     apmApmModifyEntry
		found bool
		min   uint64
	)
	it := m.Iterate()
	for it.Next(&key, &e) {
		if at := e.At; at != 0 && at+uint64(entryStale) > now && (!found || at < min) {
			min, found = at, true
		}
	}
	if it.Err() != nil {
		return 1, true // cannot tell: no mark past anything
	}
	return min, found
}

// WantMark asks for a watermark past at (Boot ns): the reader wakes when
// the clock is markSlack past it, drains the ring and hands out a mark.
func (c *Collector) WantMark(at uint64) {
	c.marking.Store(true)
	c.want.Store(at)
	if at == 0 {
		return
	}
	// The reader re-reads the request before each wait; wake it only
	// when its current wait would end too late.
	// One wake-up at a time: under a stream of requests (inputs
	// arriving in a storm) the reader is busy anyway.
	if wake := c.wallAt(wakeFor(at)); wake.UnixNano() < c.waitUntil.Load() && c.flushing.CompareAndSwap(false, true) {
		_ = c.reader.Flush()
	}
}

// wakeFor is when a mark past at (Boot ns) can be had: the mark is
// markSlack behind the clock and must be above at.
func wakeFor(at uint64) uint64 { return at + uint64(markSlack) + uint64(50*time.Microsecond) }

// readDeadline is when the reader's next wait ends: pollInterval from now,
// or sooner for a requested mark.
func (c *Collector) readDeadline() time.Time {
	dl := time.Now().Add(pollInterval)
	if w := c.want.Load(); w != 0 {
		if at := c.wallAt(wakeFor(w)); at.Before(dl) {
			dl = at
		}
	}
	c.waitUntil.Store(dl.UnixNano())
	return dl
}

// wallAt converts a Boot time to the wall clock for a deadline.
func (c *Collector) wallAt(boot uint64) time.Time {
	return time.Now().Add(time.Duration(int64(boot) - int64(boottime.Now())))
}

// sendMark hands out a mark when the ring is empty, and clears a request
// it is done with. false: the collector is closing.
func (c *Collector) sendMark() bool {
	if !c.marking.Load() {
		return true // nobody reads marks (trace, record): no map walk
	}
	mark := c.markAt()
	if mark == 0 {
		return true // records came in: the next read takes them, then marks
	}
	// A request is done once a mark passes it, or once it is overdue and
	// this is the best the ring allows (an entry still waits for its
	// exit): the next mark then comes with the next poll, not in a spin.
	w := c.want.Load()
	if w != 0 && (w < mark || !time.Now().Before(c.wallAt(w+uint64(2*markSlack)))) {
		c.want.CompareAndSwap(w, 0)
	}
	// At most one mark a millisecond (the wait rounds to milliseconds
	// and may end early), unless it is the one asked for.
	if mark <= c.lastMark || (mark < c.lastMark+uint64(time.Millisecond) && !(w != 0 && w < mark)) {
		return true
	}
	c.lastMark = mark
	select {
	case c.out <- item{mark: mark}:
		return true
	case <-c.done:
		return false
	}
}
