package apm

import (
	"fmt"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// Truth is one ground-truth reading of a QP: what the kernel answered to a
// query (rdma netlink RES_QP_GET, or an actuator's QUERY_QP) at At. Feed
// only QPs that APM applies to (RC, UC, XRC: rdmanl.QP.HasPathMig).
type Truth struct {
	Device   string
	QPN      uint32
	Mig      event.MigState
	State    event.QPState
	HasState bool   // State is valid
	At       uint64 // CLOCK_BOOTTIME nanoseconds of the reading
	Source   string // "netlink", "query", ...
	PID      uint32 // the owner, as the kernel names it (optional): used
	Comm     string // when no event has named the QP's owner yet
}

// Stats counts what the model did.
type Stats struct {
	Events       uint64 // events applied
	Truths       uint64 // ground-truth readings applied
	Late         uint64 // inputs older than the reorder window allowed (applied anyway)
	Unattributed uint64 // CM events that could not be tied to a QP
	Dropped      uint64 // events for new QPs beyond Config.MaxQPs
	Ignored      uint64 // events about QPs APM does not apply to (UD, GSI, SMI) or about nothing
	QPs          int    // QP histories tracked now
	Pending      int    // inputs waiting in the reorder stage
	Findings     map[Kind]uint64
	Resolutions  uint64
}

// Model is the per-QP APM model. It is not safe for concurrent use: one
// goroutine feeds it.
type Model struct {
	cfg   Config
	sink  func(Finding)
	in    reorder
	qps   *store
	devs  *interner
	comms *interner
	tm    timers
	now   uint64 // model time: Boot of the last applied input or deadline
	gen   uint32
	ids   uint64
	wall  time.Duration     // wall clock minus Boot, from the last event that had both
	cmIDs map[uint64]uint64 // (device << 32 | local comm id) -> QP key
	stats Stats

	lastDev   string
	lastDevID uint32
}

// New returns a model that hands every finding and resolution to sink.
func New(cfg Config, sink func(Finding)) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid apm config: %w", err)
	}
	if sink == nil {
		sink = func(Finding) {}
	}
	m := &Model{
		cfg:   cfg,
		sink:  sink,
		qps:   newStore(),
		devs:  newInterner(1 << 16),
		comms: newInterner(4096),
		cmIDs: make(map[uint64]uint64),
	}
	m.in.window = uint64(cfg.ReorderWindow)
	m.stats.Findings = make(map[Kind]uint64)
	return m, nil
}

// Config returns the thresholds in force.
func (m *Model) Config() Config { return m.cfg }

// Handle takes one event. A ground-truth reading in the stream
// (event.KindTruth) is applied as Truth, MarkCM or Gone would apply it. It is
// applied once no event from another CPU can
// still overtake it (Config.ReorderWindow), so findings may come out of a
// later Handle, Truth, Advance or Flush call. ev must stay unchanged until
// it is applied (a source that reuses Event values must hold more than a
// window's worth); the model keeps no reference after that.
func (m *Model) Handle(ev *event.Event) {
	if ev == nil {
		return
	}
	if !ev.Time.IsZero() {
		m.wall = time.Duration(ev.Time.UnixNano() - int64(ev.Boot))
	}
	m.input(item{boot: ev.Boot, ev: ev})
}

// Truth takes one ground-truth reading, through the same reorder stage as
// the events so that it is judged against every event before t.At.
func (m *Model) Truth(t Truth) {
	m.input(item{boot: t.At, in: &input{truth: t, op: opTruth}})
}

func (m *Model) input(it item) {
	if m.in.window == 0 || it.boot < m.in.out {
		if it.boot < m.in.out {
			m.stats.Late++
		}
		m.apply(it)
		return
	}
	m.in.push(it)
	m.release(m.in.releaseLimit())
}

// Advance tells the model that the source's clock reached now (Boot
// nanoseconds) even if no event came: inputs older than the reorder window
// are applied and deadlines up to now minus the window fire.
func (m *Model) Advance(now uint64) {
	limit := uint64(0)
	if now > m.in.window {
		limit = now - m.in.window
	}
	m.release(limit)
	m.fire(limit, true)
	if limit > m.now {
		m.now = limit
	}
}

// Flush applies every waiting input and fires the deadlines up to the last
// one, as at the end of a recording. Deadlines later than that stay pending:
// call Advance to judge them.
func (m *Model) Flush() {
	m.release(^uint64(0))
}

func (m *Model) release(limit uint64) {
	for {
		it, ok := m.in.pop(limit)
		if !ok {
			return
		}
		m.apply(it)
	}
}

// apply judges the deadlines that fall before the input, then applies it.
func (m *Model) apply(it item) {
	m.fire(it.boot, false)
	if it.boot > m.now {
		m.now = it.boot
	}
	if it.ev != nil {
		if it.ev.Kind == event.KindTruth {
			m.truthEvent(it.ev)
			return
		}
		m.stats.Events++
		m.event(it.ev)
		return
	}
	switch it.in.op {
	case opMarkCM:
		m.markCM(&it.in.key)
	case opGone:
		m.gone(&it.in.key)
	default:
		m.stats.Truths++
		m.truth(&it.in.truth)
	}
}

// fire runs the timers due before t (at or before t when inclusive).
func (m *Model) fire(t uint64, inclusive bool) {
	for {
		tm, ok := m.tm.peek()
		if !ok || tm.when > t || (!inclusive && tm.when == t) {
			return
		}
		m.tm.pop()
		q := m.qps.at(tm.slot)
		if q.timerAt != tm.when {
			continue // the QP is gone, or an earlier wake-up superseded this one
		}
		q.timerAt = 0
		m.now = max(m.now, tm.when) // the deadline is judged at its own time
		m.deadlines(tm.slot, q)
	}
}

// wake asks for a deadline check of q at when.
func (m *Model) wake(slot int32, q *qp, when uint64) {
	if q.timerAt != 0 && q.timerAt <= when {
		return // an earlier wake-up re-judges everything and re-arms
	}
	q.timerAt = when
	m.tm.push(timer{when: when, slot: slot})
}

// Stats returns the counters.
func (m *Model) Stats() Stats {
	s := m.stats
	s.QPs = m.qps.live()
	s.Pending = m.in.len()
	s.Findings = make(map[Kind]uint64, len(m.stats.Findings))
	for k, v := range m.stats.Findings {
		s.Findings[k] = v
	}
	return s
}

// Now is the model time: the Boot of the last input or deadline applied.
func (m *Model) Now() uint64 { return m.now }

func (m *Model) devID(name string) uint32 {
	if name == m.lastDev && m.lastDevID != 0 {
		return m.lastDevID
	}
	id := m.devs.id(name)
	m.lastDev, m.lastDevID = name, id
	return id
}

func (m *Model) keyOf(device string, qpn uint32) uint64 {
	return uint64(m.devID(device))<<32 | uint64(qpn)
}

// get returns the QP for key, creating a fresh history when create is set
// and none exists.
func (m *Model) get(key uint64, create bool) (int32, *qp) {
	if slot, ok := m.qps.lookup(key); ok {
		return slot, m.qps.at(slot)
	}
	if !create {
		return -1, nil
	}
	if m.cfg.MaxQPs > 0 && m.qps.live() >= m.cfg.MaxQPs {
		m.stats.Dropped++
		return -1, nil
	}
	slot := m.qps.alloc(key)
	q := m.qps.at(slot)
	m.gen++
	*q = qp{key: key, gen: m.gen, mig: event.MigMigrated}
	return slot, q
}

func (m *Model) drop(slot int32, q *qp) {
	if q.x != nil && q.x.commID != 0 {
		delete(m.cmIDs, q.key>>32<<32|uint64(q.x.commID))
	}
	m.qps.release(slot)
}

func (q *qp) ax() *aux {
	if q.x == nil {
		q.x = &aux{}
	}
	return q.x
}

// QPView is a read-only summary of one QP history.
type QPView struct {
	Key       Key
	PID       uint32
	Comm      string
	State     event.QPState
	Mig       event.MigState // believed
	CM        bool
	HasAlt    bool
	InEpisode bool
	Episodes  uint32 // migrations seen in this generation
}

// Lookup returns the current history of a QP.
func (m *Model) Lookup(device string, qpn uint32) (QPView, bool) {
	_, q := m.get(m.keyOf(device, qpn), false)
	if q == nil {
		return QPView{}, false
	}
	v := QPView{
		Key: m.keyView(q), PID: q.pid, Comm: m.comms.name(q.comm),
		State: q.state, Mig: q.mig, CM: q.flags&fCM != 0, HasAlt: q.alt.valid(),
	}
	if q.x != nil {
		v.Episodes = q.x.prev.n
		if q.x.ep != nil {
			v.InEpisode = q.x.ep.rearm.boot == 0
			v.Episodes = q.x.ep.n
		}
	}
	return v, true
}

// MarkCM tells the model that, at Boot time at, a QP is driven by the CM
// (for example because rdma netlink lists a cm_id bound to it). It goes
// through the reorder stage like an event. See docs/findings.md.
func (m *Model) MarkCM(device string, qpn uint32, at uint64) {
	m.input(item{boot: at, in: &input{key: event.QPKey{Device: device, QPN: qpn}, op: opMarkCM}})
}

// Gone tells the model that, at Boot time at, a QP no longer exists
// although no destroy was seen (it vanished from an rdma netlink snapshot).
// Its history is freed like on a destroy.
func (m *Model) Gone(device string, qpn uint32, at uint64) {
	m.input(item{boot: at, in: &input{key: event.QPKey{Device: device, QPN: qpn}, op: opGone}})
}

func (m *Model) gone(k *event.QPKey) {
	if slot, q := m.get(m.keyOf(k.Device, k.QPN), false); q != nil {
		m.drop(slot, q)
	}
}

func (m *Model) markCM(k *event.QPKey) {
	if k.QPN == 0 {
		return
	}
	if _, q := m.get(m.keyOf(k.Device, k.QPN), true); q != nil {
		q.flags |= fCM
	}
}

func (m *Model) keyView(q *qp) Key {
	return Key{Device: m.devs.name(uint32(q.key >> 32)), QPN: uint32(q.key), Gen: q.gen}
}
