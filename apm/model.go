package apm

import (
	"fmt"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// Stats counts what the model did.
type Stats struct {
	Events       uint64 // events applied (ground-truth readings included)
	Truths       uint64 // ground-truth readings applied
	Late         uint64 // inputs older than the reorder window allowed (judged at their own stamp)
	Duplicates   uint64 // second copies of one QP event (driver and core hooks both saw it)
	Reboots      uint64 // times the source's clock restarted and the model started afresh
	Unattributed uint64 // CM events, and driver QP events, that could not be tied to a QP
	Dropped      uint64 // events for new QPs beyond Config.MaxQPs
	Ignored      uint64 // events about QPs APM does not apply to (UD, GSI, SMI) or about nothing
	QPs          int    // QP histories tracked now
	Pending      int    // inputs waiting in the reorder stage
	Findings     map[Kind]uint64
	Resolutions  uint64
	LossSpans    uint64 // stretches of missing records the model was told of (Lost)
}

// Model is the per-QP APM model. It is not safe for concurrent use: one
// goroutine feeds it.
type Model struct {
	cfg         Config
	sink        func(Finding)
	ids         *IDs
	in          reorder
	qps         *store
	devs        *interner
	comms       *interner
	tm          timers
	now         uint64 // model time: Boot of the last applied input or deadline
	at          uint64 // the time the input or deadline being judged stands at
	gen         uint32
	wall        time.Duration      // wall clock minus Boot, from the last event that had both
	cmIDs       map[uint64]cmBound // (device << 32 | local comm id) -> QP generation
	portErr     map[uint64]uint64  // (device << 32 | port) -> Boot of its last PORT_ERR
	lastPortErr portErrAt          // the last PORT_ERR on any port
	portUp      map[uint64]uint64  // (device << 32 | port) -> Boot of its last PORT_ACTIVE
	losses      []lossSpan         // stretches with missing records (Lost)
	stats       Stats

	lastDev   string
	lastDevID uint32
}

// cmBound is the QP generation a CM communication id was last seen with.
type cmBound struct {
	key uint64
	gen uint32
}

// New returns a model that hands every finding and resolution to sink. Its
// finding IDs come from a fresh allocator unless ids is given: pass the
// one allocator of the process so that IDs are unique across producers.
func New(cfg Config, sink func(Finding), ids ...*IDs) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid apm config: %w", err)
	}
	if sink == nil {
		sink = func(Finding) {}
	}
	m := &Model{cfg: cfg, sink: sink, ids: &IDs{}, devs: newInterner(1 << 16), comms: newInterner(4096)}
	if len(ids) > 0 && ids[0] != nil {
		m.ids = ids[0]
	}
	m.fresh()
	m.stats.Findings = make(map[Kind]uint64)
	return m, nil
}

// fresh forgets every QP (a new model, or a new boot).
func (m *Model) fresh() {
	m.qps = newStore()
	m.cmIDs = make(map[uint64]cmBound)
	m.portErr = make(map[uint64]uint64)
	m.portUp = make(map[uint64]uint64)
	m.lastPortErr = portErrAt{}
	m.losses = nil
	m.tm = nil
	m.in = reorder{window: uint64(m.cfg.ReorderWindow)}
	m.now, m.at = 0, 0
}

// Config returns the thresholds in force.
func (m *Model) Config() Config { return m.cfg }

// IDs returns the model's finding-ID allocator, for producers of other
// findings about the same stream (the actuator, pairing).
func (m *Model) IDs() *IDs { return m.ids }

// Handle takes one event; ground-truth readings (event.KindTruth) come the
// same way. It is applied once no event from another CPU can still overtake
// it (Config.ReorderWindow), so findings may come out of a later Handle,
// Advance or Finish call. ev must stay unchanged until it is applied (a
// source that reuses Event values must hold more than a window's worth);
// the model keeps no reference after that.
func (m *Model) Handle(ev *event.Event) {
	if ev == nil {
		return
	}
	// A record far behind the clock is late, not a new boot: a firmware
	// command can block for a minute and its record is stamped at entry.
	// New boots come from the source's boot identity (NewBoot).
	if !ev.Time.IsZero() {
		m.wall = time.Duration(ev.Time.UnixNano() - int64(ev.Boot))
	}
	if m.in.window == 0 || ev.Boot < m.in.out {
		if ev.Boot < m.in.out {
			m.stats.Late++
		}
		m.apply(ev)
		return
	}
	m.in.push(ev)
	m.release(m.in.releaseLimit())
	for m.cfg.MaxPending > 0 && m.in.len() > m.cfg.MaxPending {
		// More inputs inside one window than the bound: the oldest is
		// applied now; what comes later and older is late.
		old, _ := m.in.popOldest()
		m.apply(old)
	}
}

// NewBoot tells the model that the source's host booted again (its boot id
// changed): what is pending is judged, then every QP history is forgotten,
// since the QPs died with the old boot. Finding IDs and generations go on.
func (m *Model) NewBoot() {
	m.release(^uint64(0))
	m.fire(m.now, true)
	m.fresh()
	m.stats.Reboots++
}

// Advance tells the model that the source's clock reached now (Boot
// nanoseconds) even if no event came: inputs older than the reorder window
// are applied and deadlines up to now minus the window fire. A clock that
// went back by more than the window is a new boot.
func (m *Model) Advance(now uint64) {
	if now+m.in.window < m.now {
		m.NewBoot()
	}
	limit := uint64(0)
	if now > m.in.window {
		limit = now - m.in.window
	}
	m.release(limit)
	m.fire(limit, true)
	m.now = max(m.now, limit)
}

// Finish ends a stream: every waiting input is applied and every deadline up
// to now (the source's clock at its end) is judged. Trace, audit and
// postmortem all end this way. Deadlines after now stay pending.
func (m *Model) Finish(now uint64) {
	m.release(^uint64(0))
	m.fire(now, true)
	m.now = max(m.now, now)
}

// Settle tells the model that its source has delivered every input
// stamped before t (a watermark: event.Marker): the inputs before t are
// applied and the deadlines before t judged now, without waiting out the
// reorder window. An input stamped before t that still arrives is late
// (Stats.Late) and judged at its own stamp, as after Advance.
func (m *Model) Settle(t uint64) {
	if t == 0 {
		return
	}
	limit := t - 1
	m.release(limit)
	m.fire(limit, true)
	m.now = max(m.now, limit)
	m.in.out = max(m.in.out, t)
}

// Due is the Boot time of the next thing only time can bring: the earliest
// pending deadline, or the oldest input waiting in the reorder stage. A
// watermark past it (Settle) judges it; without watermarks, Advance judges
// it once the clock is a reorder window past it. ok false: nothing waits.
// It costs a look at the top of the deadline heap (superseded wake-ups
// found there are dropped).
func (m *Model) Due() (at uint64, ok bool) {
	for {
		tm, found := m.tm.peek()
		if !found {
			break
		}
		if q := m.qps.at(tm.slot); q != nil && q.timerAt == tm.when {
			at, ok = tm.when, true
			break
		}
		m.tm.pop() // the QP is gone, or an earlier wake-up superseded this one
	}
	if in, found := m.in.oldest(); found && (!ok || in < at) {
		at, ok = in, true
	}
	return at, ok
}

// ReorderWindow is how long Advance holds inputs back.
func (m *Model) ReorderWindow() time.Duration { return time.Duration(m.in.window) }

func (m *Model) release(limit uint64) {
	for {
		ev, ok := m.in.pop(limit)
		if !ok {
			return
		}
		m.apply(ev)
	}
}

// apply judges the deadlines that fall before the input, then applies it
// at its own stamp.
func (m *Model) apply(ev *event.Event) {
	m.fire(ev.Boot, false)
	m.now = max(m.now, ev.Boot)
	m.at = ev.Boot
	m.stats.Events++
	m.event(ev)
}

// fire runs the timers due before t (at or before t when inclusive), each
// at its own time.
func (m *Model) fire(t uint64, inclusive bool) {
	for {
		tm, ok := m.tm.peek()
		if !ok || tm.when > t || (!inclusive && tm.when == t) {
			return
		}
		m.tm.pop()
		q := m.qps.at(tm.slot)
		if q == nil || q.timerAt != tm.when {
			continue // the QP is gone, or an earlier wake-up superseded this one
		}
		q.timerAt = 0
		m.now = max(m.now, tm.when)
		m.at = tm.when
		m.deadlines(tm.slot, q, tm.when)
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
	*q = qp{key: key, gen: m.gen, mig: event.MigMigrated, born: uint32(m.at / 1e9)}
	return slot, q
}

// byQPN finds the one live history with a QPN on any device, for a
// driver's copy of an event that names no device. Ambiguous or unknown:
// none.
func (m *Model) byQPN(qpn uint32) (int32, *qp) {
	found, fq := int32(-1), (*qp)(nil)
	n := 0
	m.devs.each(func(id uint32, _ string) {
		if slot, ok := m.qps.lookup(uint64(id)<<32 | uint64(qpn)); ok {
			found, fq = slot, m.qps.at(slot)
			n++
		}
	})
	if n != 1 {
		return -1, nil
	}
	return found, fq
}

// drop frees a QP history (destroy, or gone from the kernel's table).
// What a pending judgement already knows is said first: a bare rearm
// stays a rearm without a new alternate.
func (m *Model) drop(slot int32, q *qp) {
	if ep := q.episode(); ep != nil && ep.bareRearm.ok() {
		m.emitNoAlt(q, ep, ep.bareRearm, false)
	}
	if q.x != nil && q.x.commID != 0 {
		k := q.key>>32<<32 | uint64(q.x.commID)
		if b := m.cmIDs[k]; b.key == q.key && b.gen == q.gen {
			delete(m.cmIDs, k)
		}
	}
	m.qps.release(slot)
}

// QPView is a read-only summary of one QP history.
type QPView struct {
	Key       Key
	PID       uint32
	Comm      string
	State     event.QPState
	Mig       event.MigState // believed (meaningful when MigKnown)
	MigKnown  bool           // a create, modify or reading showed it; a QP first seen mid-stream has it unknown
	CM        bool
	HasAlt    bool // an alternate that leads another way than the primary
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
		State: q.state, Mig: q.mig, MigKnown: q.flags&fMigKnown != 0, CM: q.flags&fCM != 0, HasAlt: q.alt.valid() && !q.alt.same(q.primary),
	}
	if q.x != nil {
		v.Episodes = q.x.prev.n
		if q.x.ep != nil {
			v.InEpisode = !q.x.ep.rearm.ok()
			v.Episodes = q.x.ep.n
		}
	}
	return v, true
}

func (m *Model) keyView(q *qp) Key {
	return Key{Device: m.devs.name(uint32(q.key >> 32)), QPN: uint32(q.key), Gen: q.gen}
}
