package fleet

import (
	"time"

	"github.com/apmwatch/apmwatch/fleet/wire"
)

// A gone end leaves a tombstone: the run and revision of its gone record.
// A record of that host's run no later than it (one sent again after the
// stream's duplicate window, a partition's copy that arrives late) is
// stale and does not bring the end back as a ghost; a later revision, or
// another run's record (a QP number used again), is a new end and takes
// the key.
type tomb struct {
	owner, run, rev uint32 // the host that laid it, and its record's run and revision
	until           int64  // when it is dropped, the engine's clock
}

// DefaultTombstoneTTL is how long a tombstone is kept: the streams'
// duplicate window and the records' maximum age (a record older than that
// is not in the stream to be sent again).
const DefaultTombstoneTTL = 10*time.Minute + 7*24*time.Hour

// DefaultMaxTombstones bounds the tombstones kept (tens of bytes each);
// past it the oldest go first (Engine.TombsEvicted counts them).
const DefaultMaxTombstones = 1 << 18

// tombs are the tombstones, dropped in the order they were laid (all live
// as long: a queue is their expiry order).
type tombs struct {
	m     map[wire.EndKey]tomb
	queue []tombAt // oldest first, from head
	head  int
}

type tombAt struct {
	key   wire.EndKey
	until int64
}

// bury lays a tombstone for key at now, and drops the expired and those
// past the bound.
func (g *Engine) bury(key wire.EndKey, owner, run, rev uint32, now time.Time) {
	if g.tombs.m == nil {
		g.tombs.m = map[wire.EndKey]tomb{}
	}
	until := now.UnixNano() + int64(g.cfg.TombstoneTTL)
	g.tombs.m[key] = tomb{owner: owner, run: run, rev: rev, until: until}
	g.tombs.queue = append(g.tombs.queue, tombAt{key: key, until: until})
	g.expireTombs(now)
	for len(g.tombs.m) > g.cfg.MaxTombstones {
		if g.popTomb() {
			g.TombsEvicted++
		}
	}
	if len(g.tombs.queue)-g.tombs.head > 2*g.cfg.MaxTombstones+1024 {
		g.tombs.compact() // entries of tombstones lifted or laid again
	}
}

// compact keeps the queue's entries of the tombstones laid, in order.
func (q *tombs) compact() {
	kept := q.queue[:0]
	for _, t := range q.queue[q.head:] {
		if cur, ok := q.m[t.key]; ok && cur.until == t.until {
			kept = append(kept, t)
		}
	}
	clear(q.queue[len(kept):])
	q.queue, q.head = kept, 0
}

// expireTombs drops the tombstones whose time passed.
func (g *Engine) expireTombs(now time.Time) {
	n := now.UnixNano()
	for g.tombs.head < len(g.tombs.queue) && g.tombs.queue[g.tombs.head].until <= n {
		g.popTomb()
	}
}

// popTomb drops the oldest entry of the queue, and its tombstone unless it
// was lifted or laid again since; it reports a tombstone dropped.
func (g *Engine) popTomb() bool {
	q := &g.tombs
	if q.head >= len(q.queue) {
		return false
	}
	t := q.queue[q.head]
	q.queue[q.head] = tombAt{}
	q.head++
	dropped := false
	if cur, ok := q.m[t.key]; ok && cur.until == t.until {
		delete(q.m, t.key)
		dropped = true
	}
	if q.head > 1024 && q.head*2 > len(q.queue) { // the queue's front is spent: move the rest down
		n := copy(q.queue, q.queue[q.head:])
		clear(q.queue[n:])
		q.queue, q.head = q.queue[:n], 0
	}
	return dropped
}

// buried reports whether a record of owner's run, revision rev, is one
// its end's tombstone outlives; a record that outlives it lifts it (a
// tombstone binds only the records of the host that laid it).
func (g *Engine) buried(key wire.EndKey, owner, run, rev uint32) bool {
	t, ok := g.tombs.m[key]
	if !ok {
		return false
	}
	if owner == t.owner && run != 0 && run == t.run && rev <= t.rev {
		return true
	}
	delete(g.tombs.m, key)
	return false
}

// Tombstones is how many gone ends the engine remembers.
func (g *Engine) Tombstones() int { return len(g.tombs.m) }
