package publish

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// trackerAt is a tracker of hostA whose ibsim0 port has LID 1, and a
// function that feeds it an event on QP 17.
func trackerAt(t *testing.T) (*Tracker, func(*event.Event)) {
	sys := t.TempDir()
	fleettest.FakeSysfs(t, sys, "ibsim0", 1, "fe80::1")
	tr := NewTracker("hostA", sys)
	tr.Run = "hostA-1"
	boot := uint64(0)
	return tr, func(e *event.Event) {
		boot += 1000
		e.Device, e.QPN, e.Boot, e.Time = "ibsim0", 17, boot, time.Unix(1000, int64(boot))
		tr.Observe(e)
	}
}

func rtr(dlid uint16, dqpn uint32) *event.Event {
	return &event.Event{Kind: event.KindModify, Modify: &event.Modify{QPType: event.QPTypeRC, AttrMask: event.AttrState | event.AttrAV | event.AttrDestQPN,
		State: event.StateRTR, DestQPN: dqpn, Primary: &event.Path{Port: 1, DLID: dlid}}}
}

// An end's gone record goes on the subject of its last record, with its
// addresses, when the QP leaves the connection (RESET); its destroy then
// publishes nothing more.
func TestTrackerGoneGoesOnTheSubjectOfTheLastRecord(t *testing.T) {
	tr, ev := trackerAt(t)
	now := time.Unix(2000, 0)
	ev(rtr(2, 18))
	first := tr.Flush(now)
	if len(first) != 1 || first[0].Gone {
		t.Fatalf("connected: %+v", first)
	}
	ev(&event.Event{Kind: event.KindModify, Modify: &event.Modify{QPType: event.QPTypeRC, AttrMask: event.AttrState, State: event.StateReset}})
	cs := tr.Flush(now.Add(time.Second))
	if len(cs) != 1 || !cs[0].Gone || wire.ConnSubject(&cs[0]) != wire.ConnSubject(&first[0]) || cs[0].Remote != first[0].Remote ||
		cs[0].Local != first[0].Local || cs[0].Rev <= first[0].Rev || cs[0].Run != "hostA-1" {
		t.Fatalf("after RESET: %+v, want the gone record of %+v", cs, first[0])
	}
	ev(&event.Event{Kind: event.KindQPDestroy, Life: &event.QPLife{QPType: event.QPTypeRC}})
	if cs := tr.Flush(now.Add(2 * time.Second)); len(cs) != 0 {
		t.Fatalf("after the destroy: %+v", cs)
	}
}

// A QP number used again for another connection: the earlier
// connection's subject gets its gone record first, then the new one its
// record, in revision order.
func TestTrackerGoneOfTheEarlierConnectionComesFirst(t *testing.T) {
	tr, ev := trackerAt(t)
	now := time.Unix(2000, 0)
	ev(rtr(2, 18))
	first := tr.Flush(now)
	ev(&event.Event{Kind: event.KindQPDestroy, Life: &event.QPLife{QPType: event.QPTypeRC}})
	ev(&event.Event{Kind: event.KindQPCreate, Life: &event.QPLife{QPType: event.QPTypeRC}})
	ev(rtr(3, 30))
	cs := tr.Flush(now.Add(time.Second))
	if len(cs) != 2 || !cs[0].Gone || wire.ConnSubject(&cs[0]) != wire.ConnSubject(&first[0]) || cs[1].Gone ||
		cs[1].Remote.QPN != 30 || cs[0].Rev >= cs[1].Rev {
		t.Fatalf("records: %+v", cs)
	}
}

// The seeds a reading does not list as live, or lists with another
// remote QPN, are marked gone on their subjects; only the reading's
// device is looked at.
func TestTrackerMarksUnlistedSeedsGone(t *testing.T) {
	tr := NewTracker("hostA", t.TempDir())
	tr.Run = "hostA-2"
	seed := func(dev string, qpn, rqpn uint32) wire.Conn {
		return wire.Conn{Host: "hostA", Device: dev, Port: 1, Local: wire.Addr{GID: "fe80::1", LID: 1, QPN: qpn}, Remote: wire.Addr{LID: 2, QPN: rqpn}, Run: "hostA-1", Rev: 9}
	}
	seeds := []wire.Conn{seed("d", 5, 6), seed("d", 7, 8), seed("d", 9, 10), seed("e", 11, 12)}
	tr.Seed(seeds)
	live := map[event.QPKey]uint32{{Device: "d", QPN: 5}: 6, {Device: "d", QPN: 7}: 99}
	cs := tr.Unlisted(live, "d", time.Unix(2000, 0))
	got := map[string]wire.Conn{}
	for _, c := range cs {
		got[wire.ConnSubject(&c)] = c
	}
	for _, s := range seeds[1:3] {
		c, ok := got[wire.ConnSubject(&s)]
		if !ok || !c.Gone || c.Run != "hostA-2" || c.Remote != s.Remote {
			t.Fatalf("seed %d: %+v", s.Local.QPN, cs)
		}
	}
	if len(cs) != 2 {
		t.Fatalf("gone: %+v", cs)
	}
	if cs := tr.Unlisted(map[event.QPKey]uint32{}, "", time.Unix(2001, 0)); len(cs) != 2 {
		t.Fatalf("a reading of every device listing none: %+v, want d/5 and e/11", cs)
	}
}

// A restarted publisher marks gone the ends its earlier run published
// that the first reading after it read them does not list.
func TestRestartedPublisherMarksItsUnlistedEndsGone(t *testing.T) {
	url := fleettest.NATS(t)
	sys := t.TempDir()
	fleettest.FakeSysfs(t, sys, "ibsim0", 1, "fe80::1")
	a := newPublisher(t, url, "hostA", sys)
	for i := range 3 {
		s := &side{p: a, dev: "ibsim0", qpn: uint32(100 + i)}
		s.connect(2, uint32(200+i))
	}
	a.Tick(time.Now())
	fleettest.WaitFor(t, 20*time.Second, "the records", func() bool {
		m, err := fleettest.TryStreamMsgs(url, wire.ConnStream, wire.ConnPrefix+">")
		return err == nil && len(m) == 3
	})
	a.Close(time.Second)
	a2 := newPublisher(t, url, "hostA", sys)
	fleettest.WaitFor(t, 20*time.Second, "the seeds", func() bool { a2.Tick(time.Now()); return a2.wantReading.Load() })
	a2.Reading(rdmanl.Snapshot{QPs: []rdmanl.QP{{Device: "ibsim0", LQPN: 100, RQPN: 200}, {Device: "ibsim0", LQPN: 101, RQPN: 999}}})
	a2.Tick(time.Now())
	fleettest.WaitFor(t, 20*time.Second, "the gone records", func() bool {
		m, err := fleettest.TryStreamMsgs(url, wire.ConnStream, wire.ConnPrefix+">")
		return err == nil && len(m) == 5
	})
	gone := map[uint32]bool{}
	for _, b := range fleettest.StreamMsgs(t, url, wire.ConnStream, wire.ConnPrefix+">")[3:] {
		var c wire.Conn
		if err := json.Unmarshal(b, &c); err != nil || !c.Gone {
			t.Fatalf("%s: %v", b, err)
		}
		gone[c.Local.QPN] = true
	}
	if !gone[101] || !gone[102] {
		t.Fatalf("gone: %v, want 101 and 102", gone)
	}
}
