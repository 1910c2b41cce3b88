package publish

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

func TestTrackerRecordsAConnectedQPWithItsAddressesAndEpisode(t *testing.T) {
	sys := t.TempDir()
	fleettest.FakeSysfs(t, sys, "ibsim0", 1, "fe80::1")
	tr := NewTracker("hostA", sys)
	at := time.Unix(1000, 0)
	ev := func(e *event.Event) {
		at = at.Add(time.Second)
		e.Device, e.QPN, e.Time, e.Boot = "ibsim0", 17, at, uint64(at.UnixNano())
		tr.Observe(e)
	}
	ev(&event.Event{Kind: event.KindModify, Modify: &event.Modify{QPType: event.QPTypeRC, AttrMask: event.AttrState | event.AttrAV | event.AttrDestQPN,
		State: event.StateRTR, DestQPN: 18, Primary: &event.Path{Port: 1, DLID: 2}}})
	ev(&event.Event{Kind: event.KindModify, Modify: &event.Modify{QPType: event.QPTypeRC, AttrMask: event.AttrPathMigState, MigState: event.MigRearm}})
	cs := tr.Flush(at)
	if len(cs) != 1 {
		t.Fatalf("records: %+v", cs)
	}
	c := cs[0]
	if c.Host != "hostA" || c.Local != (wire.Addr{GID: "fe80::1", LID: 1, QPN: 17}) || c.Remote != (wire.Addr{LID: 2, QPN: 18}) || !c.Armed || !c.APM || c.Port != 1 {
		t.Fatalf("record: %+v", c)
	}
	if len(tr.Flush(at)) != 0 {
		t.Fatal("a record without a change")
	}
	ev(&event.Event{Kind: event.KindQPEvent, QP: &event.QPEvent{Type: event.EvPathMig, QPType: event.QPTypeRC}})
	// an rdma netlink reading that started before the migration says
	// nothing against it
	ev(&event.Event{Kind: event.KindTruth, Truth: &event.Truth{Op: event.TruthRead, QPType: event.QPTypeRC, Mig: event.MigArmed, Span: uint64(2 * time.Second)}})
	c = tr.Flush(at)[0]
	if c.Armed || c.Episode.N != 1 || len(c.Episode.Migrations) != 1 || c.Mig != "ARMED" {
		t.Fatalf("after the migration: %+v", c)
	}
	// a later reading in REARM is a rearm the probes did not see
	ev(&event.Event{Kind: event.KindTruth, Truth: &event.Truth{Op: event.TruthRead, QPType: event.QPTypeRC, Mig: event.MigRearm}})
	c = tr.Flush(at)[0]
	if !c.Armed || c.Episode.Rearm.IsZero() || !c.Changed.Equal(at) {
		t.Fatalf("after the reading: %+v", c)
	}
	ev(&event.Event{Kind: event.KindQPDestroy, Life: &event.QPLife{QPType: event.QPTypeRC}})
	c = tr.Flush(at)[0]
	if !c.Gone || tr.Len() != 0 {
		t.Fatalf("after the destroy: %+v (tracked %d)", c, tr.Len())
	}
}

func TestTrackerRepublishesUnchangedEndsAfterRefresh(t *testing.T) {
	tr := NewTracker("hostA", t.TempDir())
	tr.Refresh = time.Hour
	at := time.Unix(1000, 0)
	tr.Observe(&event.Event{Kind: event.KindModify, Device: "d", QPN: 5, Time: at, Boot: 1, Modify: &event.Modify{QPType: event.QPTypeRC,
		AttrMask: event.AttrAV | event.AttrDestQPN, DestQPN: 6, Primary: &event.Path{Port: 1, DLID: 2}}})
	if len(tr.Flush(at)) != 1 || len(tr.Flush(at.Add(30*time.Minute))) != 0 {
		t.Fatal("first record, then none within the refresh")
	}
	cs := tr.Flush(at.Add(61 * time.Minute))
	if len(cs) != 1 || !cs[0].At.Equal(at.Add(61*time.Minute).UTC()) {
		t.Fatalf("refresh: %+v", cs)
	}
}

func TestTrackerTakesTheAddressesOfAnOlderQPFromItsSeed(t *testing.T) {
	tr := NewTracker("hostA", t.TempDir())
	at := time.Unix(1000, 0)
	read := func(qpn, rqpn uint32) {
		tr.Observe(&event.Event{Kind: event.KindTruth, Device: "d", QPN: qpn, Time: at, Boot: 1,
			Truth: &event.Truth{Op: event.TruthRead, QPType: event.QPTypeRC, RQPN: rqpn, Mig: event.MigArmed}})
	}
	read(5, 6)
	read(7, 8)
	if cs := tr.Flush(at); len(cs) != 0 {
		t.Fatalf("records without a remote address: %+v", cs)
	}
	tr.Seed([]wire.Conn{
		{Host: "hostA", Device: "d", Port: 1, Local: wire.Addr{GID: "fe80::1", LID: 1, QPN: 5}, Remote: wire.Addr{LID: 2, QPN: 6}},
		{Host: "hostA", Device: "d", Port: 1, Local: wire.Addr{GID: "fe80::1", LID: 1, QPN: 7}, Remote: wire.Addr{LID: 2, QPN: 99}}, // another connection
	})
	cs := tr.Flush(at)
	if len(cs) != 1 || cs[0].Local != (wire.Addr{GID: "fe80::1", LID: 1, QPN: 5}) || cs[0].Remote != (wire.Addr{LID: 2, QPN: 6}) || !cs[0].Armed {
		t.Fatalf("seeded: %+v", cs)
	}
}

// A modify of the APM attributes announces itself at its entry
// (modify-entry); only its modify record, at the return, says whether it
// armed: a rearm the driver refused leaves the end unarmed.
func TestTrackerWaitsForTheReturnOfAModify(t *testing.T) {
	tr := NewTracker("hostA", t.TempDir())
	at := time.Unix(1000, 0)
	ev := func(e *event.Event) {
		at = at.Add(time.Second)
		e.Device, e.QPN, e.Time, e.Boot = "ibsim0", 17, at, uint64(at.UnixNano())
		tr.Observe(e)
	}
	rearm := func(k event.Kind, ret int32) *event.Event {
		return &event.Event{Kind: k, Modify: &event.Modify{QPType: event.QPTypeRC, AttrMask: event.AttrPathMigState, MigState: event.MigRearm, Ret: ret}}
	}
	ev(rearm(event.KindModifyEntry, 0))
	if tr.Len() != 0 {
		t.Fatal("a call in progress made a QP worth tracking")
	}
	ev(&event.Event{Kind: event.KindModify, Modify: &event.Modify{QPType: event.QPTypeRC, AttrMask: event.AttrState | event.AttrAV | event.AttrDestQPN,
		State: event.StateRTR, DestQPN: 18, Primary: &event.Path{Port: 1, DLID: 2}}})
	ev(&event.Event{Kind: event.KindQPEvent, QP: &event.QPEvent{Type: event.EvPathMig, QPType: event.QPTypeRC}})
	if c := tr.Flush(at); len(c) != 1 || c[0].Armed || c[0].Episode.N != 1 {
		t.Fatalf("after the migration: %+v", c)
	}
	ev(rearm(event.KindModifyEntry, 0))
	if c := tr.Flush(at); len(c) != 0 {
		t.Fatalf("the entry of a rearm changed the record: %+v", c)
	}
	ev(rearm(event.KindModify, -22))
	if c := tr.Flush(at); len(c) != 0 {
		t.Fatalf("a refused rearm changed the record: %+v", c)
	}
	ev(rearm(event.KindModifyEntry, 0))
	ev(rearm(event.KindModify, 0))
	c := tr.Flush(at)
	if len(c) != 1 || !c[0].Armed || !c[0].Episode.Rearm.Equal(at) {
		t.Fatalf("after the rearm returned: %+v, want armed at %v", c, at)
	}
}

// The local port's LID mask count (sysfs lid_mask_count) goes into the
// record: the fleet takes a path's DLID to its port by it.
func TestTrackerRecordsThePortsLMC(t *testing.T) {
	sys := t.TempDir()
	fleettest.FakeSysfs(t, sys, "ibsim0", 4, "fe80::1")
	if err := os.WriteFile(filepath.Join(sys, "ibsim0", "ports", "1", "lid_mask_count"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := NewTracker("hostA", sys)
	at := time.Unix(1000, 0)
	tr.Observe(&event.Event{Kind: event.KindModify, Device: "ibsim0", QPN: 17, Time: at, Boot: uint64(at.UnixNano()),
		Modify: &event.Modify{QPType: event.QPTypeRC, AttrMask: event.AttrState | event.AttrAV | event.AttrDestQPN,
			State: event.StateRTR, DestQPN: 18, Primary: &event.Path{Port: 1, DLID: 10, SrcPathBits: 1}}})
	cs := tr.Flush(at)
	if len(cs) != 1 || cs[0].Local != (wire.Addr{GID: "fe80::1", LID: 4, LMC: 2, QPN: 17}) || cs[0].Remote.LID != 10 {
		t.Fatalf("records: %+v", cs)
	}
	if _, r := cs[0].Keys(); r.String() != "fe80000000000000:lid8/18" {
		t.Fatalf("remote key %v, want hostB's base LID 8", r)
	}
}
