package publish

import (
	"math"
	"net/netip"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// Tracker turns one host's events into connection records: for every
// RC/UC QP that is connected (a destination QPN), its addresses (the
// primary path loaded at RTR, the port's GID and LID from sysfs), its
// APM state and its current episode. It is not safe for concurrent use:
// the audit loop feeds it.
type Tracker struct {
	host  string
	ports *portAddrs
	qps   map[event.QPKey]*tqp
	dirty map[event.QPKey]bool
	rev   uint64
	// Run names this run of the publisher in its records.
	Run string
	// Refresh republishes an unchanged end this often, so that a
	// long-lived connection outlives the stream's age limit (0: never).
	Refresh  time.Duration
	nextScan time.Time
	// seeds are the addresses of this host's ends as its last run
	// published them (Seed): a QP this run did not see connect takes its
	// addresses from there.
	seeds map[event.QPKey]wire.Conn
}

// tqp is what the tracker knows of one QP.
type tqp struct {
	typ       event.QPType
	state     event.QPState
	port      uint32
	sgidIndex uint8
	dlid      uint16
	dgid      [16]byte
	global    bool
	destQPN   uint32
	mig       event.MigState
	hasMig    bool
	migRead   time.Time
	armed     bool
	apm       bool   // armed at least once
	changed   uint64 // Boot of the last change the events made to armed
	changedAt time.Time
	ep        wire.Episode
	pid       uint32
	comm      string
	gone      bool
	published bool
	pubAt     time.Time  // when its last record was made
	seedLocal *wire.Addr // the local address from a seed (the AV's GID index is not known)
	// last is where its last record went (its subject's names and
	// addresses): the end's gone record goes there too, when the QP goes,
	// leaves the connection (RESET) or connects anew elsewhere.
	last *wire.Conn
}

// hasAddr reports whether the QP's remote address is known.
func (q *tqp) hasAddr() bool { return q.dlid != 0 || q.global }

// NewTracker returns a tracker for the named host; sysfsRoot is
// /sys/class/infiniband ("" for that).
func NewTracker(host, sysfsRoot string) *Tracker {
	return &Tracker{host: host, ports: newPortAddrs(sysfsRoot), qps: map[event.QPKey]*tqp{}, dirty: map[event.QPKey]bool{}}
}

// Observe takes one event (probes or rdma netlink reading).
func (t *Tracker) Observe(e *event.Event) {
	if e.QPN == 0 || e.Device == "" {
		return
	}
	k := e.Key()
	q := t.qps[k]
	if q == nil {
		if len(t.qps) >= wire.MaxTracked || !t.creates(e) {
			return
		}
		q = &tqp{}
		t.qps[k] = q
	}
	if e.PID != 0 {
		q.pid = e.PID
	}
	if e.Comm != "" {
		q.comm = e.Comm
	}
	before := *q
	switch {
	case e.Kind == event.KindModifyEntry:
		// a call in progress: its modify record, at the return, says what it did
	case e.Modify != nil:
		t.modify(q, e)
	case e.QP != nil:
		if e.QP.Type == event.EvPathMig && !q.inFreshMigration(e) {
			q.migrate(e.Time)
			q.changed, q.changedAt = e.Boot, e.Time
		}
	case e.Life != nil && e.Kind == event.KindQPDestroy:
		if e.Life.Ret == 0 {
			q.gone = true
		}
	case e.Life != nil && e.Kind == event.KindQPCreate:
		if e.Life.Ret == 0 && (q.gone || q.published) {
			*q = tqp{typ: e.Life.QPType, published: q.published, last: q.last} // a reused QPN: a new end
		}
		q.typ = e.Life.QPType
	case e.Truth != nil:
		t.truth(q, e)
	}
	if !q.same(&before) {
		t.dirty[k] = true
	}
}

// creates reports whether an event makes a QP worth tracking.
func (t *Tracker) creates(e *event.Event) bool {
	switch {
	case e.Modify != nil:
		return e.Kind == event.KindModify && e.Modify.Ret == 0 && (e.Modify.QPType == event.QPTypeRC || e.Modify.QPType == event.QPTypeUC)
	case e.Truth != nil:
		return e.Truth.Op == event.TruthRead && (e.Truth.QPType == event.QPTypeRC || e.Truth.QPType == event.QPTypeUC)
	case e.Life != nil && e.Kind == event.KindQPCreate:
		return e.Life.Ret == 0 && (e.Life.QPType == event.QPTypeRC || e.Life.QPType == event.QPTypeUC)
	}
	return false
}

func (t *Tracker) modify(q *tqp, e *event.Event) {
	m := e.Modify
	if m.Ret != 0 {
		return
	}
	if m.QPType != 0 || q.typ == 0 {
		q.typ = m.QPType
	}
	if m.Has(event.AttrState) {
		q.state = m.State
		if m.State == event.StateReset {
			*q = tqp{typ: q.typ, published: q.published, pid: q.pid, comm: q.comm, last: q.last}
			return
		}
	}
	if m.Has(event.AttrAV) && m.Primary != nil {
		p := m.Primary
		q.port, q.sgidIndex, q.dlid, q.dgid, q.global = p.Port, p.SGIDIndex, p.DLID, p.DGID, p.IsGlobal
	}
	if m.Has(event.AttrDestQPN) {
		q.destQPN = m.DestQPN
	}
	if m.Has(event.AttrPathMigState) {
		switch m.MigState {
		case event.MigMigrated: // a forced migration
			q.migrate(e.Time)
		case event.MigRearm, event.MigArmed:
			if !q.armed && len(q.ep.Migrations) > 0 {
				q.ep.Rearm = e.Time
			}
			q.armed, q.apm = true, true
		}
		q.changed, q.changedAt = e.Boot, e.Time
	}
}

// migrate starts a new episode (or adds to the open one: no rearm since).
func (q *tqp) migrate(at time.Time) {
	q.ep.N++
	if !q.ep.Rearm.IsZero() || q.armed {
		q.ep.Migrations, q.ep.Rearm = nil, time.Time{}
	}
	if len(q.ep.Migrations) < wire.MaxMigrations {
		q.ep.Migrations = append(q.ep.Migrations, at)
	}
	q.armed, q.apm = false, true
}

// inFreshMigration reports a PATH_MIG that follows the forced migration
// of the same episode (the hardware's event for the software's request).
func (q *tqp) inFreshMigration(e *event.Event) bool {
	return !q.armed && len(q.ep.Migrations) > 0 && q.ep.Rearm.IsZero() && e.Time.Sub(q.ep.Migrations[len(q.ep.Migrations)-1]) < time.Second
}

// truth takes an rdma netlink reading. Its mig state overrides what the
// events say only when the reading began after the events' last change
// (a reading during an arm may show the state before it).
func (t *Tracker) truth(q *tqp, e *event.Event) {
	tr := e.Truth
	if tr.Op == event.TruthGone {
		q.gone = true
		return
	}
	if tr.QPType != 0 {
		q.typ = tr.QPType
	}
	if tr.HasState {
		q.state = tr.State
	}
	if tr.RQPN != 0 && q.destQPN == 0 {
		q.destQPN = tr.RQPN
	}
	at := e.Time
	q.mig, q.hasMig, q.migRead = tr.Mig, true, at
	if e.Boot-min(tr.Span, e.Boot) <= q.changed {
		return
	}
	switch tr.Mig {
	case event.MigArmed, event.MigRearm:
		if !q.armed {
			if len(q.ep.Migrations) > 0 {
				q.ep.Rearm = at
			}
			q.armed, q.apm, q.changed, q.changedAt = true, true, e.Boot, at
		}
	case event.MigMigrated:
		if q.armed {
			q.migrate(at)
			q.changed, q.changedAt = e.Boot, e.Time
		}
	}
}

func (q *tqp) same(o *tqp) bool {
	return q.typ == o.typ && q.state == o.state && q.port == o.port && q.sgidIndex == o.sgidIndex && q.dlid == o.dlid &&
		q.dgid == o.dgid && q.global == o.global && q.destQPN == o.destQPN && q.mig == o.mig && q.hasMig == o.hasMig &&
		q.armed == o.armed && q.apm == o.apm && q.ep.N == o.ep.N && q.ep.Rearm.Equal(o.ep.Rearm) && q.gone == o.gone
}

// Seed takes the last records this host published (an earlier run of the
// daemon) for the QPs it will not see connect again.
func (t *Tracker) Seed(cs []wire.Conn) {
	if t.seeds == nil {
		t.seeds = map[event.QPKey]wire.Conn{}
	}
	for _, c := range cs {
		if c.Gone || c.Host != t.host || len(t.seeds) >= wire.MaxTracked {
			continue
		}
		k := event.QPKey{Device: c.Device, QPN: c.Local.QPN}
		t.seeds[k] = c
		if q := t.qps[k]; q != nil && !q.hasAddr() {
			t.dirty[k] = true
		}
	}
}

// seed fills a QP's addresses from its seed, when the QP is the same
// connection (the same destination QPN).
func (t *Tracker) seed(k event.QPKey, q *tqp) {
	s, ok := t.seeds[k]
	if !ok || q.destQPN != 0 && q.destQPN != s.Remote.QPN {
		return
	}
	delete(t.seeds, k)
	q.port, q.dlid, q.global, q.destQPN = s.Port, s.Remote.LID, s.Global, s.Remote.QPN
	if ip, err := netip.ParseAddr(s.Remote.GID); err == nil && ip.Is6() {
		q.dgid = ip.As16()
	}
	l := s.Local
	q.seedLocal = &l
}

// Flush returns a record of every end that changed since the last call,
// and forgets the ends that are gone. An end whose remote address is not
// known yet (a QP older than the daemon, before its seed came) waits: a
// record without it could not pair. A gone end's record goes on the
// subject of its last record, with its addresses; so does the gone
// record of a QP's earlier connection when the QP leaves it (RESET) or
// its record moves to another subject (connected anew elsewhere), just
// before the new connection's record.
func (t *Tracker) Flush(now time.Time) []wire.Conn {
	out, _ := t.FlushAtMost(now, math.MaxInt)
	return out
}

// FlushAtMost is Flush for the first ends that give max records (one
// more at most: an end can give its earlier connection's gone record
// too); the others stay changed, for the next flush, and left counts
// them.
func (t *Tracker) FlushAtMost(now time.Time, max int) (out []wire.Conn, left int) {
	if t.Refresh > 0 && !now.Before(t.nextScan) {
		t.nextScan = now.Add(time.Minute)
		for k, q := range t.qps {
			if q.published && now.Sub(q.pubAt) >= t.Refresh {
				t.dirty[k] = true
			}
		}
	}
	var again []event.QPKey
	defer func() {
		for _, k := range again {
			t.dirty[k] = true
		}
	}()
	for k := range t.dirty {
		if len(out) >= max {
			return out, len(t.dirty)
		}
		q := t.qps[k]
		delete(t.dirty, k)
		if q == nil {
			continue
		}
		if q.gone {
			delete(t.qps, k)
			if q.last != nil {
				out = append(out, t.goneRecord(q.last, now))
			}
			continue
		}
		if !q.hasAddr() {
			t.seed(k, q)
		}
		if q.destQPN == 0 || q.typ != event.QPTypeRC && q.typ != event.QPTypeUC {
			if q.last != nil { // left its connection
				out = append(out, t.goneRecord(q.last, now))
				q.last = nil
			}
			continue // not connected (yet)
		}
		if !q.hasAddr() {
			again = append(again, k) // at the next flush: its seed may come
			continue
		}
		q.published, q.pubAt = true, now
		c := t.record(k, q, now)
		if q.last != nil && wire.ConnSubject(q.last) != wire.ConnSubject(&c) {
			g := t.goneRecord(q.last, now)
			g.Rev, c.Rev = c.Rev, g.Rev // the gone first
			out = append(out, g)
		}
		q.last = lastOf(&c)
		out = append(out, c)
	}
	return out, 0
}

// lastOf keeps what makes a record's subject, and its addresses.
func lastOf(c *wire.Conn) *wire.Conn {
	return &wire.Conn{Host: c.Host, Device: c.Device, Port: c.Port, Type: c.Type, Local: c.Local, Remote: c.Remote, Global: c.Global,
		Changed: c.Changed}
}

// goneRecord is the gone record of the end whose last record was last:
// on the same subject, with the same addresses.
func (t *Tracker) goneRecord(last *wire.Conn, now time.Time) wire.Conn {
	t.rev++
	g := *last
	g.Gone, g.At, g.Rev, g.Run = true, now.UTC(), t.rev, t.Run
	return g
}

// Unlisted returns the gone records of this host's ends that its earlier
// runs published (the seeds not taken yet) and that a reading of rdma
// netlink does not list as live: live maps the QPs it lists to their
// remote QPN (0: not said); a QP listed with another remote QPN is
// another connection on a QP number used again. Only the seeds of device
// are looked at ("" for every device: the reading's scope). The seeds go.
func (t *Tracker) Unlisted(live map[event.QPKey]uint32, device string, now time.Time) []wire.Conn {
	var out []wire.Conn
	for k, s := range t.seeds {
		if device != "" && k.Device != device {
			continue
		}
		if rq, ok := live[k]; ok && (rq == 0 || rq == s.Remote.QPN) {
			continue
		}
		delete(t.seeds, k)
		out = append(out, t.goneRecord(lastOf(&s), now))
	}
	return out
}

func (t *Tracker) record(k event.QPKey, q *tqp, now time.Time) wire.Conn {
	t.rev++
	c := wire.Conn{Host: t.host, Device: k.Device, Type: q.typ.String(), Global: q.global, Armed: q.armed, APM: q.apm,
		Local: wire.Addr{QPN: k.QPN}, Remote: wire.Addr{LID: q.dlid, QPN: q.destQPN}, PID: q.pid, Comm: q.comm,
		Gone: q.gone, At: now.UTC(), Rev: t.rev, Run: t.Run, Episode: q.ep, Changed: q.changedAt.UTC()}
	if q.changedAt.IsZero() {
		q.changedAt = now
		c.Changed = now.UTC()
	}
	c.Episode.Migrations = append([]time.Time(nil), q.ep.Migrations...)
	if q.state != 0 || q.typ != 0 {
		c.State = q.state.String()
	}
	if q.hasMig {
		c.Mig, c.MigRead = q.mig.String(), q.migRead.UTC()
	}
	if q.global {
		c.Remote.GID = netip.AddrFrom16(q.dgid).String()
	}
	var local wire.Addr
	local, c.Port = t.ports.lookup(k.Device, q.port, q.sgidIndex, now)
	c.Local.GID, c.Local.LID, c.Local.LMC = local.GID, local.LID, local.LMC
	if q.seedLocal != nil {
		c.Local.GID, c.Local.LID, c.Local.LMC = q.seedLocal.GID, q.seedLocal.LID, q.seedLocal.LMC
	}
	return c
}

// Changed is the number of ends changed and not flushed yet.
func (t *Tracker) Changed() int { return len(t.dirty) }

// Len is the number of QPs tracked.
func (t *Tracker) Len() int { return len(t.qps) }
