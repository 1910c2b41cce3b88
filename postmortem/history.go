package postmortem

import (
	"fmt"
	"time"

	"github.com/apmwatch/apmwatch/connid"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/output"
)

// hist is one QP history (one generation of a QPN on a device) as the
// postmortem sees it: identity for pairing, the APM steps for the pairing
// layer, and the timeline entries.
type hist struct {
	s       *stream
	device  string
	qpn     uint32
	gen     uint32
	pid     uint32
	comm    string
	destQPN uint32
	primary *event.Path
	alt     *event.Path
	dests   []connid.Addr // where every path it loaded leads (pairing identity)
	first   uint64
	last    uint64

	migrations []uint64       // Boot of each migration kept: PATH_MIG, or a forced MIGRATED
	rearms     []uint64       // Boot of each successful modify to REARM kept
	armedReads []uint64       // Boot of each reading that turned from MIGRATED to ARMED or REARM (a rearm, seen or not)
	readMig    event.MigState // the last reading's migration state
	readAt     uint64         // and its Boot (0: no reading yet)
	nMig       int            // migrations, kept or not
	nRearm     int
	forced     bool // the last migration was forced and its PATH_MIG may follow
	commIDs    []uint32
	entries    []entry
	dropped    int // entries beyond the cap
	findings   []int
	peer       *hist
}

// forcedEventWithin is how soon a PATH_MIG after a forced migration
// (software's modify to MIGRATED, or the HCA's as the lab module plays it)
// is taken as that migration's event rather than a new migration.
const forcedEventWithin = time.Second

// copyWithin is how far apart two copies of one QP event may come (the
// model's DuplicateWindow).
const copyWithin = 500 * time.Millisecond

// copyOfLast reports whether a PATH_MIG at boot is a second copy of the
// last migration: within copyWithin of it, with no rearm in between.
func (h *hist) copyOfLast(boot uint64) bool {
	if len(h.migrations) == 0 {
		return false
	}
	last := h.migrations[len(h.migrations)-1]
	if boot < last || boot-last > uint64(copyWithin) {
		return false
	}
	return len(h.rearms) == 0 || h.rearms[len(h.rearms)-1] < last
}

// entry is one point of a timeline.
type entry struct {
	Boot   uint64
	Seq    uint64
	Kind   string // event kind, or "finding"
	What   string // short label
	Detail string
	Fail   bool // a call that returned an error

	repeats int // readings alike that followed it at once
}

func (h *hist) name() string { return fmt.Sprintf("%s %s/%d", h.s.label, h.device, h.qpn) }

// histories indexes a stream's QP histories.
type histories struct {
	all    []*hist
	cur    map[event.QPKey]*hist
	byKey  map[event.QPKey][]*hist // every generation of a QPN, in order
	comms  map[commKey]*hist
	gen    uint32
	max    int // entries kept per QP
	maxQPs int // histories kept (0: no bound)
	b      *budget
}

func newHistories(maxEntries, maxQPs int, b *budget) histories {
	return histories{cur: map[event.QPKey]*hist{}, byKey: map[event.QPKey][]*hist{}, comms: map[commKey]*hist{},
		max: maxEntries, maxQPs: maxQPs, b: b}
}

type commKey struct {
	device string
	id     uint32
}

func (hs *histories) get(s *stream, k event.QPKey, fresh bool, boot uint64) *hist {
	if h := hs.cur[k]; h != nil && !fresh {
		return h
	}
	if hs.maxQPs > 0 && len(hs.all) >= hs.maxQPs {
		delete(hs.cur, k) // later events of this generation are not filed in the last one
		hs.b.DroppedQPs++
		return nil
	}
	hs.gen++
	h := &hist{s: s, device: k.Device, qpn: k.QPN, gen: hs.gen, first: boot}
	hs.cur[k] = h
	hs.all = append(hs.all, h)
	hs.byKey[k] = append(hs.byKey[k], h)
	return h
}

// observe files one event into its QP history. It returns the history, or
// nil for events about no QP that could not be tied to one.
func (hs *histories) observe(s *stream, e *event.Event) *hist {
	var h *hist
	switch {
	case e.Truth != nil:
		return hs.truth(s, e) // readings join the QPs the events made, or make their own
	case e.QPN != 0:
		h = hs.get(s, e.Key(), e.Kind == event.KindQPCreate, e.Boot)
	case e.MAD != nil:
		ours := e.MAD.LocalID
		if e.MAD.Dir == event.MADRecv {
			ours = e.MAD.RemoteID
		}
		if h = hs.comms[commKey{e.Device, ours}]; h == nil {
			h = hs.comms[commKey{"", ours}]
		}
	}
	if h == nil {
		return nil
	}
	h.last = e.Boot
	if e.PID != 0 && e.Kind != event.KindQPEvent && e.Kind != event.KindMAD && h.pid == 0 {
		h.pid, h.comm = e.PID, e.Comm
	}
	fail := false
	switch {
	case e.Kind == event.KindModifyEntry:
		// a call in progress: what it sets is known at its return
	case e.Modify != nil:
		m := e.Modify
		fail = m.Ret != 0
		if !fail {
			if m.Has(event.AttrDestQPN) {
				h.destQPN = m.DestQPN
			}
			if m.Primary != nil {
				p := *m.Primary
				h.primary = &p
				h.dests = connid.Add(h.dests, pathAddr(&p), maxDests)
			}
			if m.Alt != nil {
				p := *m.Alt
				h.alt = &p
				h.dests = connid.Add(h.dests, pathAddr(&p), maxDests)
			}
			if m.Has(event.AttrPathMigState) && m.MigState == event.MigRearm {
				hs.step(&h.rearms, &h.nRearm, e.Boot)
				h.forced = false
			}
			if m.Has(event.AttrPathMigState) && m.MigState == event.MigMigrated && !m.Has(event.AttrState) {
				hs.step(&h.migrations, &h.nMig, e.Boot)
				h.forced = true
			}
		}
	case e.QP != nil:
		if e.QP.Type == event.EvPathMig {
			// the event of a forced migration is the same migration, and
			// so is the second copy of one event (the driver's hook and
			// ib_core's both saw it): a QP migrates again only once rearmed
			if !h.forced && !h.copyOfLast(e.Boot) || len(h.migrations) == 0 || e.Boot-h.migrations[len(h.migrations)-1] > uint64(forcedEventWithin) {
				hs.step(&h.migrations, &h.nMig, e.Boot)
			}
			h.forced = false
		}
	case e.Notify != nil:
		fail = e.Notify.Ret != 0
		if e.Notify.LocalID != 0 {
			hs.bindComm(h, e.Device, e.Notify.LocalID)
		}
	case e.Handler != nil:
		fail = e.Handler.Ret != 0
		if e.Handler.RemoteID != 0 { // the MAD's remote id is ours
			hs.bindComm(h, e.Device, e.Handler.RemoteID)
		}
	case e.Life != nil:
		fail = e.Life.Ret != 0
	}
	if len(h.entries) >= hs.max {
		h.dropped++
		return h
	}
	if !take(&hs.b.timeline) {
		h.dropped++
		hs.b.DroppedTimeline++
		return h
	}
	h.entries = append(h.entries, entry{Boot: e.Boot, Seq: e.Seq, Kind: e.Kind.String(),
		What: label(e), Detail: output.Detail(e), Fail: fail})
	return h
}

// step keeps the time of a migration or rearm while the budget lasts, and
// counts it in any case.
func (hs *histories) step(at *[]uint64, n *int, boot uint64) {
	*n++
	if !take(&hs.b.steps) {
		hs.b.DroppedSteps++
		return
	}
	*at = append(*at, boot)
}

// truth files a ground-truth reading into the current history of its QP
// (a QP no event named gets a history of its readings): every reading is
// on the timeline, but one that repeats the entry just before it (they
// come every second) is counted there instead of listed again.
func (hs *histories) truth(s *stream, e *event.Event) *hist {
	h := hs.cur[e.Key()]
	if h == nil {
		if e.Truth.Op != event.TruthRead {
			return nil
		}
		if h = hs.get(s, e.Key(), false, e.Boot); h == nil {
			return nil
		}
	}
	if h.pid == 0 && e.PID != 0 {
		h.pid, h.comm = e.PID, e.Comm
	}
	what := label(e)
	if n := len(h.entries); n > 0 && h.entries[n-1].Kind == e.Kind.String() && h.entries[n-1].What == what {
		h.entries[n-1].repeats++
		h.last = e.Boot
		return h
	}
	if len(h.entries) >= hs.max {
		h.dropped++
		return h
	}
	if !take(&hs.b.timeline) {
		hs.b.DroppedTimeline++
		return h
	}
	h.last = e.Boot
	if t := e.Truth; t.Op == event.TruthRead {
		// a rearm, seen or not: a reading of REARM or ARMED after one of
		// MIGRATED (straight after a PATH_MIG either may be a QP that
		// never migrated)
		readMigrated := h.readAt != 0 && h.readMig == event.MigMigrated
		if (t.Mig == event.MigRearm || t.Mig == event.MigArmed) && readMigrated {
			var n int
			hs.step(&h.armedReads, &n, e.Boot)
		}
		h.readMig, h.readAt = t.Mig, e.Boot
	}
	detail := output.Detail(e)
	if t := e.Truth; t.Op == event.TruthRead && t.Span == 0 {
		detail += " (no span: an older recorder did not say how long its dump ran; the row stands for some time since the previous reading)"
	}
	h.entries = append(h.entries, entry{Boot: e.Boot, Kind: e.Kind.String(), What: what, Detail: detail})
	return h
}

func (hs *histories) bindComm(h *hist, device string, id uint32) {
	if hs.comms[commKey{device, id}] == h {
		return
	}
	if len(h.commIDs) >= maxQPCommIDs || len(hs.comms) >= 2*maxCommIDs {
		return
	}
	h.commIDs = append(h.commIDs, id)
	hs.comms[commKey{device, id}] = h
	hs.comms[commKey{"", id}] = h
}

// label is the short name of an event on a timeline.
func label(e *event.Event) string {
	switch {
	case e.Modify != nil:
		m := e.Modify
		s := "modify"
		if e.Kind == event.KindModifyEntry {
			s = "modify entered"
		}
		if m.Has(event.AttrState) {
			s += " ->" + m.State.String()
		}
		if m.Has(event.AttrAltPath) {
			s += " alt"
		}
		if m.Has(event.AttrPathMigState) {
			s += " " + m.MigState.String()
		}
		if m.Ret != 0 && e.Kind == event.KindModify {
			s += " " + output.Errno(m.Ret)
		}
		return s
	case e.QP != nil:
		return e.QP.Type.String()
	case e.Port != nil:
		return e.Port.Type.String()
	case e.Notify != nil:
		return "cm_notify " + e.Notify.Type.String()
	case e.Handler != nil:
		return event.CMAttrName(e.Handler.AttrID) + " handler"
	case e.MAD != nil:
		return event.CMAttrName(e.MAD.AttrID) + " " + e.MAD.Dir.String()
	case e.Truth != nil:
		if e.Truth.Op != event.TruthRead {
			return "truth: " + e.Truth.Op.String()
		}
		s := "truth: " + e.Truth.State.String() + " " + e.Truth.Mig.String()
		if e.Truth.Span == 0 {
			s += " (no span)"
		}
		return s
	}
	return e.Kind.String()
}
