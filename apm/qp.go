package apm

import (
	"encoding/binary"
	"hash/maphash"

	"github.com/apmwatch/apmwatch/event"
)

// ref points at the event that proved something: its sequence number and
// Boot time. The zero ref means "not seen".
type ref struct {
	seq  uint64
	boot uint64
}

func (r ref) ok() bool { return r.boot != 0 || r.seq != 0 }

func refOf(ev *event.Event) ref { return ref{seq: ev.Seq, boot: ev.Boot} }

// route is a compact path: enough to compare routes (event.Path.SameRoute
// compares port, DLID, source path bits and, for global routes, DGID) and
// to name them.
type route struct {
	h       uint64 // hash of the fields SameRoute compares; 0 = no path
	dlid    uint16
	port    uint8
	timeout uint8 // alt_timeout it was loaded with (0: infinite, or a primary)
	bits    uint8 // source path bits (an LMC path)
}

var routeSeed = maphash.MakeSeed()

func routeOf(p *event.Path) route {
	if p == nil {
		return route{}
	}
	var b [24]byte
	binary.LittleEndian.PutUint32(b[0:], p.Port)
	binary.LittleEndian.PutUint16(b[4:], p.DLID)
	b[7] = p.SrcPathBits
	if p.IsGlobal {
		b[6] = 1
		copy(b[8:], p.DGID[:])
	}
	h := maphash.Bytes(routeSeed, b[:])
	if h == 0 {
		h = 1
	}
	return route{h: h, dlid: p.DLID, port: uint8(p.Port), timeout: p.Timeout, bits: p.SrcPathBits}
}

func (r route) valid() bool       { return r.h != 0 }
func (r route) same(o route) bool { return r.h != 0 && r.h == o.h }
func (r route) String() string {
	if !r.valid() {
		return "none"
	}
	s := "port " + itoa(uint64(r.port)) + " dlid " + itoa(uint64(r.dlid))
	if r.bits != 0 {
		s += " path bits " + itoa(uint64(r.bits))
	}
	return s
}

// QP flags.
const (
	fStateKnown     uint8 = 1 << iota // QP state seen (create, modify or reading)
	fMigKnown                         // path-migration state seen (create, modify or reading)
	fCM                               // CM-managed (see docs/findings.md)
	fNeverArmedDone                   // never-armed reported for this generation
	fMigErrDone                       // migration-error reported since the last rearm
	fArmed                            // rearmed (or read REARM/ARMED) since the last migration
)

// qp is the hot per-QP state. It stays small: one million of them must fit
// in well under 256 bytes each including the index. Rarely needed state
// lives in aux, allocated on the first migration, CM event or reading.
type qp struct {
	key     uint64 // device index << 32 | qpn
	gen     uint32
	pid     uint32
	comm    uint32 // interned
	state   event.QPState
	mig     event.MigState // believed path-migration state
	flags   uint8
	qpType  event.QPType
	born    uint32 // Boot second of this generation's first record (what lost records may have changed)
	primary route
	alt     route
	altLoad ref    // last successful alternate-path load
	rearm   ref    // last successful rearm
	rtsAt   uint64 // when the QP last entered RTS
	migAt   uint64 // when an event last changed the believed mig state
	timerAt uint64 // earliest pending wake-up in the timer heap, 0 = none
	x       *aux
}

// armed reports whether the QP may migrate: only an ARMED QP can. It is
// armed once rearmed (or read REARM or ARMED) since its last migration; the
// model cannot tell REARM from ARMED without a reading, so both count. A
// MIGRATED reading does not disarm it: the PATH_MIG of the migration it
// shows may still be on its way. A QP whose migration state the model never
// saw gets the benefit of the doubt.
func (q *qp) armed() bool {
	return q.flags&fMigKnown == 0 || q.flags&fArmed != 0
}

// aux is the cold per-QP state.
type aux struct {
	ep   *episode // current episode, nil when none
	prev epSummary
	last lastMig // the last migration, kept after its episode ends

	migs     []ref // migrations in the flapping window
	flapping bool  // a flapping finding covers the current burst

	lapRecv    ref // a LAP received and not yet answered by an APR
	lapStuckID uint64
	commID     uint32 // local CM communication id, when learnt

	rearmSince uint64 // readings have shown REARM since
	stuckID    uint64
	stuckLast  uint64 // the stuck-rearm finding's Last: its resolution is never dated before it
	truthRearm ref    // rearm judged by the last mismatch check
	rearmEnd   uint64 // when the last rearm call returned, if it took a millisecond or more
	migErrAt   uint64 // a PATH_MIG_ERR on a QP already unprotected: the sign its path failed
	pendTruth  uint64 // a MIGRATED reading after a rearm awaiting TruthGrace
	pendRearm  ref
	lastRead   uint64 // the previous reading, for readings without a span (older recorders)
	readAt     uint64 // the last reading of this generation (its dump's end)

	calls       []call       // modifies of the APM attributes in progress (calls.go)
	lastEv      qpEvCopy     // the last QP event applied, to drop its second copy
	unprot      *unprotected // why the QP has no valid armed alternate, when it has none
	failedDedup []uint64     // (class << 32 | errno) already reported for apm-modify-failed
}

// lastMig is the last migration of a QP generation, and what the model
// knows of the path it moved onto (migration-error).
type lastMig struct {
	at     ref
	forced bool   // software forced it (modify PATH_MIG_STATE=MIGRATED)
	event  bool   // its PATH_MIG came (a forced migration's own event)
	onto   route  // the alternate it moved onto (none: never seen loaded)
	same   bool   // that alternate led the way of the primary it left
	stale  uint64 // Boot of a PORT_ERR on that alternate's port before it, 0: none
	proven bool   // the path carried traffic since: a reading of ARMED after a rearm, or alive past retries
}

// retriesOver is how long after a migration the retries on the path it
// moved onto have surely run out: (retry_cnt+1) x 4.096 us x 2^alt_timeout
// with retry_cnt at its most, 7. 0: not known (no alternate seen loaded, or
// alt_timeout 0, which IBTA makes infinite).
func (l *lastMig) retriesOver() uint64 {
	t := l.onto.timeout
	if t == 0 || t > 31 {
		return 0
	}
	return 8 * 4096 << t // ns
}

// qpEvCopy identifies one QP event for the duplicate check.
type qpEvCopy struct {
	boot    uint64
	typ     event.EventType
	untyped bool
}

type epSummary struct {
	n          uint32
	rearmed    bool
	rearmNoAlt bool
	forced     bool
}

// episode is one migration and what software did about it.
type episode struct {
	n         uint32 // migration number in this generation, from 1
	forced    bool
	mig       ref
	event     ref   // PATH_MIG that followed a forced migration
	stray     ref   // a PATH_MIG while the QP was not armed: evidence, not a migration
	altLoad   ref   // last successful alternate load in the episode
	altFailed int32 // errno of a refused alternate load in the episode
	lapRecv   ref
	notify    ref
	rearm     ref
	bareRearm ref              // a rearm with no load before it, judged after EpisodeLinger
	mis       *pendingMismatch // a reading awaiting TruthGrace
	missedID  uint64           // missed-rearm finding, for its resolution
	missLast  uint64           // and its Last: its resolution is never dated before it
	done      uint16           // kinds reported in this episode (bit per kind)
}

const (
	dMissed uint16 = 1 << iota
	dNoAlt
	dLapWindow
	dLapOrder
	dLapNotify
	dNotNotified
	dMismatch
)

func (q *qp) ax() *aux {
	if q.x == nil {
		q.x = &aux{}
	}
	return q.x
}

// lastMig is the QP's last migration, nil when none.
func (q *qp) lastMig() *lastMig {
	if q.x == nil || !q.x.last.at.ok() {
		return nil
	}
	return &q.x.last
}

func (q *qp) episode() *episode {
	if q.x == nil {
		return nil
	}
	return q.x.ep
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
