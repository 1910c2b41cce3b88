package recording

import (
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

func truthEvent() *event.Event {
	return &event.Event{Kind: event.KindTruth, Boot: 5_000_000_000, Time: time.Unix(0, 5_000_000_000+1e18),
		PID: 207, Comm: "lab-pair", Device: "rxe0", QPN: 17,
		Truth: &event.Truth{Op: event.TruthRead, Source: "netlink", QPType: event.QPTypeRC, Origin: event.OriginUser,
			State: event.StateRTS, HasState: true, Mig: event.MigRearm, RQPN: 18, CM: true}}
}

// A ground-truth reading comes back field for field, through a file.
func TestTruthRoundTrip(t *testing.T) {
	gone := &event.Event{Kind: event.KindTruth, Boot: 6_000_000_000, Device: "rxe0", QPN: 17,
		Truth: &event.Truth{Op: event.TruthGone, Source: "netlink"}}
	evs := []*event.Event{truthEvent(), gone}
	w := writeAll(t, testMeta(), Options{}, evs, 1)
	got, _, err := replay(t, w.data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("read %d events, want 2", len(got))
	}
	for i := range evs {
		if !got[i].Time.Equal(evs[i].Time) {
			t.Errorf("event %d: time %v, want %v", i, got[i].Time, evs[i].Time)
		}
		got[i].Time, evs[i].Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got[i], evs[i]) {
			t.Errorf("event %d:\n got %s\nwant %s", i, dump(got[i]), dump(evs[i]))
		}
	}
}

// A reader from before the Truth payload knows flag bits 0-7 only: it reads
// the common fields and ignores the payload after them. Decoding with bit 8
// cleared plays that reader.
func TestTruthIgnoredByOlderReader(t *testing.T) {
	e := truthEvent()
	rec := appendEvent(nil, e, 0)
	d := dec{b: rec[1:]}
	body := d.bytes(d.uvarint())
	bd := dec{b: body}
	flags := bd.uvarint()
	if flags&hasTruth == 0 || hasTruth != 1<<8 {
		t.Fatalf("flags %b: the Truth payload must take bit 8", flags)
	}
	old := binary.AppendUvarint(nil, flags&^hasTruth)
	old = append(old, bd.b...)
	got, err := decodeEvent(old, 0, nil)
	if err != nil {
		t.Fatalf("an older reader fails on a truth event: %v", err)
	}
	want := *e
	want.Truth = nil
	if got.Truth != nil || got.Kind != event.KindTruth || got.QPN != 17 || got.Comm != "lab-pair" {
		t.Fatalf("older reader got %s, want %s", dump(got), dump(&want))
	}
}
