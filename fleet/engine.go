package fleet

import (
	"container/heap"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/apmwatch/apmwatch/fleet/wire"
)

// PairState is what a paired connection's two ends say together.
type PairState uint8

const (
	// StateUnpaired is an end whose peer has no record (yet): counted
	// apart, never judged.
	StateUnpaired    PairState = iota
	StateNoAPM                 // neither end ever armed: APM is not used
	StateArmed                 // both ends armed: protected
	StateHalfArmed             // one end armed, the other never: no migration yet
	StateOneSided              // after a migration one end rearmed, the other did not
	StateUnprotected           // both ends used APM and neither is armed now
	nStates
)

var stateNames = [...]string{"unpaired", "no-apm", "armed", "half-armed", "one-sided", "unprotected"}

func (s PairState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Bad reports a state in which the connection cannot fail over.
func (s PairState) Bad() bool { return s >= StateHalfArmed }

// EngineConfig holds the engine's thresholds.
type EngineConfig struct {
	// Deadline is how long a pair must stay one-sided or unprotected
	// before it is judged (the model's rearm deadline).
	Deadline time.Duration
	// Partition is put in the findings (which partition judged them).
	Partition func(l, r wire.EndKey) int
	// TombstoneTTL is how long a gone end's tombstone is kept
	// (DefaultTombstoneTTL); MaxTombstones bounds them
	// (DefaultMaxTombstones).
	TombstoneTTL  time.Duration
	MaxTombstones int
	// MaxSkew is how far ahead of its receipt a record's at and changed
	// may be (DefaultMaxSkew); MaxEndsPerHost bounds the ends one host
	// holds (DefaultMaxEndsPerHost).
	MaxSkew        time.Duration
	MaxEndsPerHost int
	// SilentAfter is how long a host that heartbeats may go unheard
	// before it is silent (DefaultSilentAfter); OwnsHost says whether
	// this engine gives a host's host-silent findings (nil: every host's).
	SilentAfter time.Duration
	OwnsHost    func(host string) bool
}

// Validate reports a bad threshold in one line.
func (c EngineConfig) Validate() error {
	if c.MaxSkew < 0 {
		return fmt.Errorf("--max-skew must not be negative: %v", c.MaxSkew)
	}
	if c.SilentAfter < 0 {
		return fmt.Errorf("--silent-after must not be negative: %v", c.SilentAfter)
	}
	return nil
}

// Engine pairs the two ends of every connection and judges the pairs.
// It is a plain data structure (one goroutine drives it); its clock is
// passed in. Memory: a 128-byte end in the slab and an 8-byte index cell
// per tracked end, at about half load (BenchmarkEngineMemory1M measures
// it).
type Engine struct {
	cfg    EngineConfig
	ends   endIndex // the slot of each end in slab
	slab   endSlab
	names  names
	judged map[uint64]bool // finding IDs already given (restarts: loaded from the stream)
	due    dueHeap
	counts [nStates]int // paired connections by state; unpaired counts ends
	emit   func(Line)
	tombs  tombs
	// hostEnds counts the ends each host holds (by owner)
	hostEnds map[uint32]int
	claims   []Claim // refused claims, the first maxClaimsKept
	// hosts are the clocks of the hosts heard (clock.go); now is the
	// stream's clock: the latest receipt, or Advance's time
	hosts map[uint32]*hostClock
	now   int64
	// unheard is the stream time in which nothing was stored, past a
	// third of SilentAfter at a time (receivedAt): no silence counts it
	unheard int64
	live    bool // every message comes, in order (Live)
	// opened are the stream's findings open when this instance started
	// (reopen.go), until a pair or a host takes them
	opened     map[uint64]openLine
	openByConn map[string][]uint64 // their IDs by connection
	openByHost map[string]uint64   // host-silent ones by host
	// Records counts the records applied; Stale those older than what the
	// engine had, Invalid those with no local address; TombsEvicted the
	// tombstones dropped before their time, past MaxTombstones.
	Records, Stale, Invalid, TombsEvicted uint64
	// Heartbeats counts the heartbeats applied.
	Heartbeats uint64
	// Refused counts the records refused, by reason.
	Refused [nRefusals]uint64
}

// end is one end of a connection, as its last record says. It holds no
// pointer (slab.go).
type end struct {
	key, remote wire.EndKey
	host, dev   uint32 // names
	owner       uint32 // the name of the host's subject token: the host that claimed the key first
	pid         uint32
	peer        uint32 // the peer's slot, noPeer when unpaired
	rev, run    uint32 // the record's Rev (low bits) and a hash of its Run
	mig         uint8  // low nibble: 0 unknown, else event.MigState+1; high: the port's LMC (migState, lmc)
	armed, apm  bool
	state       PairState
	migrated    int64 // first migration of the current episode (unix ns), 0 none
	rearm       int64 // the rearm after it, 0 none
	migRead     int64
	since       int64 // when armed last changed (or the end was first seen), host clock
	sinceS      int64 // the same on the stream's clock (clock.go)
	at          int64 // the record's publish time
	// open is the finding open on this pair (both ends hold it), 0 none:
	// its ID (53 bits) and the pair state it judged (openOf)
	open uint64
}

// migState is the end's last read migration state: 0 unknown, else
// event.MigState+1.
func (e *end) migState() uint8 { return e.mig & 0x0f }

// lmc is the LID mask count of the end's port (wire.Conn.LMC).
func (e *end) lmc() uint8 { return e.mig >> 4 }

// openStateShift places an open finding's pair state above its ID.
const openStateShift = 56

// openOf packs an open finding's ID and the pair state it judged.
func openOf(id uint64, s PairState) uint64 { return id | uint64(s)<<openStateShift }

// openID is the ID of the finding open on e's pair, 0 none.
func (e *end) openID() uint64 { return e.open & (1<<53 - 1) }

// openState is the pair state the open finding judged.
func (e *end) openState() PairState { return PairState(e.open >> openStateShift) }

// NewEngine returns an engine that hands its findings and resolutions to
// emit.
func NewEngine(cfg EngineConfig, emit func(Line)) *Engine {
	if cfg.Partition == nil {
		cfg.Partition = wire.PartitionOf
	}
	if cfg.TombstoneTTL <= 0 {
		cfg.TombstoneTTL = DefaultTombstoneTTL
	}
	if cfg.MaxTombstones <= 0 {
		cfg.MaxTombstones = DefaultMaxTombstones
	}
	if cfg.MaxSkew <= 0 {
		cfg.MaxSkew = DefaultMaxSkew
	}
	if cfg.MaxEndsPerHost <= 0 {
		cfg.MaxEndsPerHost = DefaultMaxEndsPerHost
	}
	if cfg.SilentAfter <= 0 {
		cfg.SilentAfter = DefaultSilentAfter
	}
	return &Engine{cfg: cfg, ends: newEndIndex(), names: newNames(), judged: map[uint64]bool{}, emit: emit, hostEnds: map[uint32]int{},
		hosts: map[uint32]*hostClock{}}
}

// MarkJudged notes a finding (or resolution) ID given before, by this
// instance's earlier run or another: it is not given again.
func (g *Engine) MarkJudged(id uint64) { g.judged[id] = true }

// Apply takes one record received at now, its host named by the record
// (Take names it by the record's subject, and checks the record against
// the subject). Records come in the order the stream stored them: within
// one run of a publisher its revisions order them (one sent again is
// stale), across runs their arrival does (a host whose clock stepped
// back at its restart is not frozen behind its earlier run's records).
func (g *Engine) Apply(c *wire.Conn, now time.Time) {
	if why := g.apply(c, wire.Token(c.Host), now, now, true); why != nRefusals {
		g.Refused[why]++
	}
}

// apply applies a record of the host whose subject token is host,
// received at receipt; it returns why it refused it (nRefusals: it did
// not). clean says the host had nothing else in flight when it sent it:
// all it queued before is stored before it, and the host's watermark
// moves to it.
func (g *Engine) apply(c *wire.Conn, host string, receipt, now time.Time, clean bool) refuseReason {
	g.receivedAt(receipt.UnixNano())
	why := g.applyRecord(c, host, receipt, now)
	g.heard(g.names.id(host), receipt.UnixNano(), clean) // after the record: the host's watermark covers it
	return why
}

func (g *Engine) applyRecord(c *wire.Conn, host string, receipt, now time.Time) refuseReason {
	g.Records++
	local, remote := c.Keys()
	if !local.Valid() {
		g.Invalid++
		return nRefusals
	}
	if g.future(c, receipt) {
		return refusedFuture
	}
	owner := g.names.id(host)
	at := c.At.UnixNano()
	ei, e := g.lookupSlot(local)
	if e != nil && e.owner != owner {
		g.claimed(e, c, owner)
		return refusedClaimed
	}
	run, rev := runHash(c.Run), uint32(c.Rev)
	if e != nil && e.newer(run, rev) || e == nil && g.buried(local, owner, run, rev) {
		g.Stale++
		return nRefusals
	}
	if c.Gone {
		if e != nil && remote.Valid() && e.remote.Valid() && remote != e.remote {
			g.Stale++ // the end of an earlier connection of this QP (another subject): not the one the key holds
			return nRefusals
		}
		if e != nil {
			g.remove(e)
		}
		g.bury(local, owner, run, rev, now)
		return nRefusals
	}
	if e == nil {
		if g.hostEnds[owner] >= g.cfg.MaxEndsPerHost {
			return refusedHostEnds
		}
		ei = g.slab.alloc()
		e = g.slab.at(ei)
		*e = end{key: local, owner: owner, peer: noPeer}
		g.ends.put(local, ei, &g.slab)
		g.hostEnds[owner]++
		g.counts[StateUnpaired]++
	}
	if !remote.Valid() && e.remote.Valid() && e.remote.QPN() == c.Remote.QPN {
		remote = e.remote // a restarted host that has not seen the QP connect yet: keep what it said before
	}
	if e.remote != remote && e.peer != noPeer {
		if e.open != 0 {
			g.closeOpen(e, fmt.Sprintf("%s is connected elsewhere now: the connection's ends are no longer paired", g.endName(e)))
		}
		g.unlink(e)
	}
	e.remote, e.at, e.rev, e.run = remote, at, uint32(c.Rev), run
	e.host, e.dev, e.pid = g.names.id(c.Host), g.names.id(c.Device), c.PID
	since := unixNano(c.Changed)
	if since == 0 {
		since = at
	}
	if since != e.since || e.sinceS == 0 {
		e.sinceS = streamSince(receipt.UnixNano(), at, since)
	}
	e.since = since
	e.armed, e.apm = c.Armed, c.APM
	e.migrated, e.rearm = unixNano(c.Episode.Migrated()), unixNano(c.Episode.Rearm)
	e.mig, e.migRead = c.LMC()<<4, unixNano(c.MigRead)
	if m, ok := parseMig(c.Mig); ok {
		e.mig |= m + 1
	}
	if e.peer == noPeer && remote.Valid() {
		if pi, p := g.lookupSlot(remote); p != nil && p.peer == noPeer && g.pairs(e, p) {
			e.peer, p.peer = pi, ei
			g.counts[StateUnpaired] -= 2
			e.state, p.state = StateNoAPM, StateNoAPM // evaluated below
			g.counts[StateNoAPM] += 2
		}
	}
	g.evaluate(e)
	return nRefusals
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// remove forgets an end (its QP is gone); its peer becomes unpaired and
// the pair's open finding closes.
func (g *Engine) remove(e *end) {
	if e.peer != noPeer {
		if e.open != 0 {
			g.closeOpen(e, fmt.Sprintf("%s is gone: the connection's ends are no longer paired", g.endName(e)))
		}
		g.unlink(e)
	}
	g.counts[StateUnpaired]--
	if g.hostEnds[e.owner]--; g.hostEnds[e.owner] <= 0 {
		delete(g.hostEnds, e.owner)
	}
	i, _ := g.ends.get(e.key, &g.slab)
	g.ends.del(e.key, &g.slab)
	g.slab.release(i)
}

func (g *Engine) unlink(e *end) {
	p := g.peerOf(e)
	g.counts[e.state] -= 2
	e.peer, p.peer = noPeer, noPeer
	e.state, p.state = StateUnpaired, StateUnpaired
	e.open, p.open = 0, 0
	g.counts[StateUnpaired] += 2
}

func (g *Engine) setState(e *end, s PairState) {
	if e.state == s {
		return
	}
	if p := g.peerOf(e); p != nil {
		g.counts[e.state] -= 2
		g.counts[s] += 2
		p.state = s
	}
	e.state = s
}

// stateOf judges a pair's ends.
func stateOf(a, b *end) PairState {
	switch {
	case !a.apm && !b.apm:
		return StateNoAPM
	case a.armed && b.armed:
		return StateArmed
	case a.armed != b.armed && a.migrated == 0 && b.migrated == 0:
		return StateHalfArmed
	case a.armed != b.armed:
		return StateOneSided
	}
	return StateUnprotected
}

// evaluate recomputes e's pair and judges it when due.
func (g *Engine) evaluate(e *end) {
	p := g.peerOf(e)
	if p == nil {
		return
	}
	if e.open == 0 && len(g.openByConn) > 0 {
		g.adopt(e)
	}
	s := stateOf(e, p)
	g.setState(e, s)
	if !s.Bad() {
		if e.open != 0 {
			g.resolve(e)
		}
		return
	}
	if s == StateHalfArmed {
		if e.open != 0 {
			g.closeOpen(e, "neither end shows a migration any more")
		}
		return
	}
	due := max(e.sinceS, p.sinceS) + int64(g.cfg.Deadline)
	if g.now < due {
		heap.Push(&g.due, dueAt{at: due, key: e.key})
		return
	}
	if lag := g.lagging(e, p, due); lag != nil {
		g.wait(lag, dueAt{at: due, key: e.key})
		return
	}
	g.judge(e, s, due)
}

// Advance moves the stream's clock to now (which never goes back),
// judges the pairs whose deadline passed by then and whose hosts both
// published past it, and the hosts silent since.
func (g *Engine) Advance(now time.Time) {
	g.expireTombs(now)
	g.tickTo(now.UnixNano())
	g.checkSilent()
}

// runDue judges the pairs due by the stream's clock.
func (g *Engine) runDue() {
	for len(g.due) > 0 && g.due[0].at <= g.now {
		d := heap.Pop(&g.due).(dueAt)
		if e := g.lookup(d.key); e != nil {
			g.evaluate(e)
		}
	}
}

// Stats are the engine's gauges.
type Stats struct {
	Ends     int
	Unpaired int
	ByState  map[PairState]int // paired connections
}

// Stats returns the gauges.
func (g *Engine) Stats() Stats {
	st := Stats{Ends: g.ends.n, Unpaired: g.counts[StateUnpaired], ByState: map[PairState]int{}}
	for s := StateNoAPM; s < nStates; s++ {
		st.ByState[s] = g.counts[s] / 2
	}
	return st
}

// dueAt is a pair to look at again at a time.
type dueAt struct {
	at  int64
	key wire.EndKey
}

type dueHeap []dueAt

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueAt)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// names interns host and device names.
type names struct {
	list []string
	ids  map[string]uint32
}

func newNames() names { return names{ids: map[string]uint32{}} }

// Bounds of the names table: names come from the hosts' records.
const (
	maxNames   = 1 << 20
	maxNameLen = 255
)

func (n *names) id(s string) uint32 {
	if len(s) > maxNameLen {
		s = s[:maxNameLen]
	}
	if i, ok := n.ids[s]; ok {
		return i
	}
	if len(n.list) >= maxNames {
		s = "(too many names)"
		if i, ok := n.ids[s]; ok {
			return i
		}
	}
	n.list = append(n.list, s)
	n.ids[s] = uint32(len(n.list) - 1)
	return uint32(len(n.list) - 1)
}

func (n *names) name(i uint32) string { return n.list[i] }

// newer reports whether the end's record is newer than a record of run,
// revision rev: within one run by revision; across runs the record that
// arrives later is (the host's clock is not trusted to order them).
func (e *end) newer(run, rev uint32) bool {
	return run != 0 && run == e.run && rev <= e.rev
}

// runHash names a publisher's run in 32 bits (0: none).
func runHash(run string) uint32 {
	if run == "" {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(run))
	return h.Sum32() | 1
}
