package collector

import (
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

func modAt(tid uint32, at uint64, qpn uint32, mask uint32) modEntry {
	return modEntry{k: apmJoinKey{PidTgid: uint64(100)<<32 | uint64(tid), Slot: uint32(apmApmSlotAPM_SLOT_MODIFY)},
		e: apmApmModifyEntry{At: at, Qpn: qpn, AttrMask: mask, DevIndex: 3, Flags: flagDev | flagUser,
			QpType: 2, MigState: 1}}
}

// A call still in progress a millisecond past its entry is announced once,
// stamped at its entry, with what the probe kept; a call younger than that
// is not (it may return at once); a call that returned is forgotten, and
// the same thread's next slow call is announced again.
func TestAnnounceCallsInProgressOnce(t *testing.T) {
	var a announcer
	ms := uint64(time.Millisecond)
	rearm := event.AttrPathMigState
	slow := modAt(7, 10*ms, 0x12, rearm)
	young := modAt(8, 10*ms+ms/2, 0x13, rearm)
	got := a.pick([]modEntry{young, slow}, nil, 11*ms)
	if len(got) != 1 || got[0].Qpn != 0x12 || got[0].BootNs != 10*ms || got[0].Tid != 7 || got[0].Pid != 100 ||
		got[0].Kind != uint8(apmApmKindAPM_KIND_MODIFY_ENTRY) || got[0].AttrMask != rearm || got[0].DevIndex != 3 ||
		got[0].Flags != flagDev|flagUser || got[0].MigState != 1 || got[0].QpType != 2 {
		t.Fatalf("first look: %+v, want the slow call's entry only", got)
	}
	if got := a.pick([]modEntry{young, slow}, nil, 12*ms); len(got) != 1 || got[0].Qpn != 0x13 {
		t.Fatalf("second look: %+v, want only the call that grew old since", got)
	}
	if got := a.pick([]modEntry{young, slow}, nil, 13*ms); len(got) != 0 {
		t.Fatalf("third look: %+v, want nothing new", got)
	}
	// slow returned; its thread calls again, slowly.
	again := modAt(7, 20*ms, 0x12, rearm)
	if got := a.pick([]modEntry{young}, nil, 14*ms); len(got) != 0 {
		t.Fatalf("after a return: %+v", got)
	}
	if got := a.pick([]modEntry{young, again}, nil, 22*ms); len(got) != 1 || got[0].BootNs != 20*ms {
		t.Fatalf("the thread's next slow call: %+v, want it announced", got)
	}
}

// Kprobe entries wait in the join map as whole modify records: a call of
// the APM attributes is announced without its paths and without the QP
// pointer the probe kept for its exit; other modifies are not; the
// announcements come oldest first across both maps.
func TestAnnounceJoinedEntries(t *testing.T) {
	var a announcer
	ms := uint64(time.Millisecond)
	k := func(tid uint32) apmJoinKey {
		return apmJoinKey{PidTgid: uint64(tid), Slot: uint32(apmApmSlotAPM_SLOT_MODIFY)}
	}
	load := apmApmRecord{BootNs: 5 * ms, Kind: uint8(apmApmKindAPM_KIND_MODIFY), Qpn: 0x21, AttrMask: event.AttrAltPath,
		Flags: flagHasAlt | flagDev, Obj: 0xffff888812345678}
	state := apmApmRecord{BootNs: 1 * ms, Kind: uint8(apmApmKindAPM_KIND_MODIFY), Qpn: 0x22, AttrMask: event.AttrState}
	got := a.pick([]modEntry{modAt(9, 7*ms, 0x23, event.AttrPathMigState)}, []joinEntry{{k(1), load}, {k(2), state}}, 20*ms)
	if len(got) != 2 || got[0].Qpn != 0x21 || got[1].Qpn != 0x23 {
		t.Fatalf("got %+v, want the alternate load (kprobe) then the rearm (fentry)", got)
	}
	if e := got[0]; e.Kind != uint8(apmApmKindAPM_KIND_MODIFY_ENTRY) || e.Flags != flagDev || e.Obj != 0 || e.BootNs != 5*ms {
		t.Errorf("joined entry %+v: want a modify-entry at its entry, no paths, no kernel pointer", e)
	}
}

// Decoded, an announcement is a modify-entry event the model takes as a
// call in progress.
func TestAnnouncedEntryDecodes(t *testing.T) {
	var a announcer
	ms := uint64(time.Millisecond)
	got := a.pick([]modEntry{modAt(7, ms, 0x12, event.AttrPathMigState)}, nil, 5*ms)
	d := decoder{devs: newDevNames(nil)}
	d.devs.set(3, "mlx5_0")
	e, err := d.event(&got[0])
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != event.KindModifyEntry || e.Device != "mlx5_0" || e.QPN != 0x12 || e.TID != 7 || e.Modify == nil ||
		e.Modify.MigState != event.MigState(1) || e.Modify.Origin != event.OriginUser || e.Modify.Ret != 0 {
		t.Errorf("decoded %+v %+v", e, e.Modify)
	}
}
