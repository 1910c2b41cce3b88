package collector

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/cilium/ebpf"
)

// Calls in progress. A modify of the APM attributes is stamped at its entry
// and has one record, at its exit; the entry waits in a map (modify_at for
// fentry, the join map inflight for kprobes) meanwhile. A firmware command
// can block for up to a minute, and the model holds the QP's deadlines
// that such a call could meet (apm/calls.go) once it knows of it: whenever
// the reader has emptied the ring, it looks in both maps and announces each
// call of the APM attributes still in progress announceAfter past its
// entry, once, as a modify-entry event stamped at that entry. A call that
// returns sooner costs no announcement. The watermarks stay below every
// entry in the maps (mark.go), so an announcement is never behind a mark.
const announceAfter = time.Millisecond

// announcer remembers the calls announced, by thread and entry stamp.
type announcer struct {
	done map[apmJoinKey]uint64
	seen map[apmJoinKey]bool // scratch: entries still in the maps
}

// maxAnnounced bounds the calls remembered: each map holds at most 4096.
const maxAnnounced = 2 * 4096

// calls reads the calls in progress from both maps at now and returns a
// record for each one to announce, oldest first.
func (a *announcer) calls(modifyAt, inflight *ebpf.Map, now uint64) []apmApmRecord {
	var (
		mods  []modEntry
		joins []joinEntry
	)
	if modifyAt != nil {
		var e modEntry
		for it := modifyAt.Iterate(); it.Next(&e.k, &e.e); {
			mods = append(mods, e)
		}
	}
	if inflight != nil {
		var j joinEntry
		for it := inflight.Iterate(); it.Next(&j.k, &j.r); {
			if j.k.Slot == uint32(apmApmSlotAPM_SLOT_MODIFY) {
				joins = append(joins, j)
			}
		}
	}
	return a.pick(mods, joins, now)
}

type (
	modEntry struct {
		k apmJoinKey
		e apmApmModifyEntry
	}
	joinEntry struct {
		k apmJoinKey
		r apmApmRecord
	}
)

// pick chooses the calls to announce among the entries in the maps at now:
// those of the APM attributes announceAfter past their entry and not yet
// announced; it forgets the calls no longer there (returned).
func (a *announcer) pick(mods []modEntry, joins []joinEntry, now uint64) []apmApmRecord {
	if a.done == nil {
		a.done, a.seen = map[apmJoinKey]uint64{}, map[apmJoinKey]bool{}
	}
	clear(a.seen)
	var out []apmApmRecord
	fresh := func(k apmJoinKey, at uint64) bool {
		a.seen[k] = true
		if at == 0 || at+uint64(announceAfter) > now || a.done[k] == at || len(a.done) >= maxAnnounced {
			return false
		}
		a.done[k] = at
		return true
	}
	for i := range mods {
		if fresh(mods[i].k, mods[i].e.At) {
			out = append(out, entryRecord(mods[i].k, &mods[i].e))
		}
	}
	for _, j := range joins {
		if j.r.AttrMask&(event.AttrAltPath|event.AttrPathMigState) != 0 && fresh(j.k, j.r.BootNs) {
			out = append(out, joinedEntry(j.r))
		}
	}
	for k := range a.done {
		if !a.seen[k] {
			delete(a.done, k) // returned
		}
	}
	slices.SortStableFunc(out, func(x, y apmApmRecord) int { return cmp.Compare(x.BootNs, y.BootNs) })
	return out
}

// entryRecord is the modify-entry record of an fentry's entry: what the
// probe kept, the thread from the key, its name from /proc.
func entryRecord(k apmJoinKey, e *apmApmModifyEntry) apmApmRecord {
	r := apmApmRecord{
		BootNs: e.At, FuncIp: e.FuncIp, Pid: uint32(k.PidTgid >> 32), Tid: uint32(k.PidTgid),
		Qpn: e.Qpn, AttrMask: e.AttrMask, DevIndex: e.DevIndex,
		Kind: uint8(apmApmKindAPM_KIND_MODIFY_ENTRY), Flags: e.Flags, QpType: e.QpType, State: e.State, MigState: e.MigState,
	}
	threadComm(r.Pid, r.Tid, r.Comm[:])
	return r
}

// joinedEntry is the modify-entry record of a kprobe's entry: the modify
// record waiting in the join map, without its paths (the call's result
// has them) and the QP the probe kept for its exit.
func joinedEntry(r apmApmRecord) apmApmRecord {
	r.Kind = uint8(apmApmKindAPM_KIND_MODIFY_ENTRY)
	r.Flags &^= flagHasPrimary | flagHasAlt
	r.Obj = 0
	return r
}

// threadComm fills comm with the thread's name, as the kernel keeps it
// (at most 15 bytes); left empty when the thread is gone.
func threadComm(pid, tid uint32, comm []int8) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
	if err != nil {
		return
	}
	for i := 0; i < len(b) && i < len(comm)-1 && b[i] != '\n'; i++ {
		comm[i] = int8(b[i])
	}
}
