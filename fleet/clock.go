package fleet

import (
	"container/heap"
	"time"

	"github.com/apmwatch/apmwatch/fleet/wire"
)

// The engine has one clock, the stream's: when JetStream stored each
// message (its receipt, from the message's metadata). Deadlines run on
// it; the hosts' own times (a record's at and changed) are evidence, and
// the durations between them (how long before its record an end changed)
// are taken from the host, which measures them on one clock.
//
// A pair is judged only when both its hosts are known to have published
// past its due time: each host has a watermark, the stream time of its
// latest message the engine consumed (a record, or a heartbeat sent with
// nothing left in its queue: heartbeat.go). A host's messages are stored
// in the order it queued them, and the engine consumes them in the
// stream's order, so nothing the host said before its watermark is still
// to come. A consumer that lags, a host whose queue drains late, a host
// whose clock is behind or ahead: none of them makes the engine judge a
// state the next message would have changed. A host never heard to
// heartbeat (a publisher that does not) has the stream's clock as its
// watermark.

// hostClock is what the engine knows of one host's messages.
type hostClock struct {
	wm     int64 // watermark: stream time of its latest message consumed (with heartbeats)
	beat   int64 // stream time of its latest heartbeat, 0: none heard
	beatAt int64 // the heartbeat's own time (the host's clock)
	// unheardAt is the engine's unheard at its latest heartbeat
	unheardAt int64
	offset    int64                 // host time minus stream time, of its latest heartbeat
	run       string                // the run of its latest heartbeat
	silent    bool                  // unheard past SilentAfter (silent.go)
	open      uint64                // the open host-silent finding
	waiting   dueHeap               // pairs due whose judgement waits for this host's watermark
	parked    map[wire.EndKey]int64 // the pairs in waiting, by end, and their due time: each once
}

// maxHosts bounds the hosts the engine follows (hostile input: names).
const maxHosts = 1 << 16

// host returns the clock of the host whose subject token's name is
// owner, nil past maxHosts.
func (g *Engine) host(owner uint32) *hostClock {
	h := g.hosts[owner]
	if h == nil && len(g.hosts) < maxHosts {
		h = &hostClock{}
		g.hosts[owner] = h
	}
	return h
}

// receivedAt moves the stream's clock to the receipt n of a message
// consumed. A receipt more than a third of SilentAfter (a heartbeat
// period, by default) past the clock is a stretch in which no host of
// this instance's stored anything at all (a server that stored nothing,
// a stream without a leader): time in which no host could have been
// heard, so it makes no host silent (checkSilent), past that third.
// Time the clock runs while the instance is current (Advance) counts.
// Only in the live stream (Live): the last records of a rebuild or of
// fleet status leave the rest out.
func (g *Engine) receivedAt(n int64) {
	if step := int64(g.cfg.SilentAfter / 3); g.live && g.now != 0 && n-g.now > step {
		g.unheard += n - g.now - step
	}
	g.tickTo(n)
}

// Live says that every message the stream stores from now on comes to
// the engine, in order: the rebuild from the last records is over.
func (g *Engine) Live() { g.live = true }

// tickTo moves the stream's clock forward to n (never back), and judges
// the pairs due by then: a message stored at n comes after them.
func (g *Engine) tickTo(n int64) {
	if n > g.now {
		g.now = n
		g.runDue()
	}
}

// heard notes a message of a host stored at receipt; complete says that
// everything the host queued before it was stored before it (a record; a
// heartbeat with an empty queue): the host's watermark moves there, and
// the pairs that waited for it are looked at again.
func (g *Engine) heard(owner uint32, receipt int64, complete bool) {
	h := g.host(owner)
	if h == nil || !complete || receipt <= h.wm {
		return
	}
	h.wm = receipt
	for len(h.waiting) > 0 && h.waiting[0].at <= h.wm {
		d := heap.Pop(&h.waiting).(dueAt)
		if h.parked[d.key] == d.at {
			delete(h.parked, d.key)
		}
		if e := g.lookup(d.key); e != nil {
			g.evaluate(e)
		}
	}
}

// watermark is how far the host's messages are known consumed: its
// watermark when it heartbeats, else the stream's clock.
func (g *Engine) watermark(owner uint32) int64 {
	if h := g.hosts[owner]; h != nil && h.beat != 0 {
		return h.wm
	}
	return g.now
}

// lagging returns the end of the pair whose host has not published past
// due yet (the one further behind), or nil.
func (g *Engine) lagging(a, b *end, due int64) *end {
	wa, wb := g.watermark(a.owner), g.watermark(b.owner)
	switch {
	case wa < due && wa <= wb:
		return a
	case wb < due:
		return b
	}
	return nil
}

// wait parks a due pair until the host of e publishes past its due time.
func (g *Engine) wait(e *end, d dueAt) {
	h := g.host(e.owner)
	if h == nil || h.parked[d.key] == d.at {
		return
	}
	if h.parked == nil {
		h.parked = map[wire.EndKey]int64{}
	}
	h.parked[d.key] = d.at
	heap.Push(&h.waiting, d)
}

// streamSince puts a host's change time on the stream's clock: the
// record was stored at receipt, and by the host's clock the change came
// at-since before it (never negative: a host's clock may step).
func streamSince(receipt, at, since int64) int64 {
	return receipt - max(0, at-since)
}

// HostClock is one host as the engine hears it.
type HostClock struct {
	Host      string        `json:"host"`
	LastHeard time.Time     `json:"last_heard"`    // stream time of its latest heartbeat
	Offset    time.Duration `json:"offset_ns"`     // its clock minus the stream's, at that heartbeat
	Silent    bool          `json:"silent"`        // unheard past --silent-after
	Ends      int           `json:"ends"`          // the ends it holds here
	Run       string        `json:"run,omitempty"` // its publisher's run
	Watermark time.Time     `json:"watermark"`     // stream time up to which its messages were consumed
}

// HostClocks returns the hosts heard to heartbeat, by name.
func (g *Engine) HostClocks() []HostClock {
	out := make([]HostClock, 0, len(g.hosts))
	g.eachHostClock(func(h HostClock) { out = append(out, h) })
	sortHostClocks(out)
	return out
}

// eachHostClock calls fn for each host heard to heartbeat, in no order.
func (g *Engine) eachHostClock(fn func(HostClock)) {
	for id, h := range g.hosts {
		if h.beat == 0 {
			continue
		}
		fn(HostClock{Host: g.names.name(id), LastHeard: time.Unix(0, h.beat).UTC(), Offset: time.Duration(h.offset),
			Silent: h.silent, Ends: g.hostEnds[id], Run: h.run, Watermark: time.Unix(0, h.wm).UTC()})
	}
}

// streamClock is an instance's reading of the stream's clock: the latest
// receipt it consumed and, while it is current (connected, caught up, its
// consumers answering), the time that passed since on its own clock. While
// it lags the clock stands at the message it is at; while it is not
// current the clock stands still, and that time never counts: a stream
// without a leader, or a consumer lost with its node, is no time in which
// a host could have been heard, so it can make no host silent and no
// deadline pass.
type streamClock struct {
	last    time.Time         // the latest receipt consumed
	idle    time.Duration     // time counted past last while current
	seen    time.Time         // the instance's clock at the latest reading or receipt
	pending map[string]uint64 // by stream: messages left, as the latest delivery said
}

func newStreamClock() *streamClock { return &streamClock{pending: map[string]uint64{}} }

// consumed notes a message of stream stored at stored, with pending left
// after it, consumed at now.
func (c *streamClock) consumed(stream string, stored time.Time, pending uint64, now time.Time) {
	if stored.After(c.last) {
		c.last, c.idle = stored, 0
	}
	c.seen = now
	c.pending[stream] = pending
}

// at is the stream's clock at now; current says nothing is known to wait
// and the stream and consumers answer.
func (c *streamClock) at(now time.Time, current bool) time.Time {
	if c.last.IsZero() {
		return time.Time{}
	}
	step := now.Sub(c.seen)
	c.seen = now
	for _, n := range c.pending {
		if n > 0 {
			return c.last
		}
	}
	if current && step > 0 {
		c.idle += step
	}
	return c.last.Add(c.idle)
}
