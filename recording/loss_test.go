package recording

import (
	"bytes"
	"testing"

	"github.com/apmwatch/apmwatch/event"
)

// TestLosses: a stats record whose Lost grew places the loss between the
// previous snapshot and its own (stamped, or the last event plus a second
// when written by an older recorder); a damaged frame places missing
// records between the events around it; no loss, no stretch.
func TestLosses(t *testing.T) {
	ev := func(boot uint64) *event.Event {
		return &event.Event{Kind: event.KindQPEvent, Boot: boot, Device: "mlx5_0", QPN: 7, QP: &event.QPEvent{Type: event.EvPathMig}}
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testMeta(), Options{FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	steps := []any{ev(100), event.Stats{At: 150}, ev(200), ev(300), event.Stats{Lost: 3, At: 350},
		ev(400), event.Stats{Lost: 3, At: 450}, ev(500), event.Stats{Lost: 5}, ev(600)}
	for _, s := range steps {
		switch s := s.(type) {
		case *event.Event:
			err = w.Write(s)
		case event.Stats:
			err = w.WriteStats(s)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil { // one frame per record
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, r, err := replay(t, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := []Loss{{From: 150, To: 350, Lost: 3}, {From: 450, To: 500 + lossSlack, Lost: 2}}
	if got := r.Losses(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("losses %+v, want %+v", got, want)
	}

	// damage the frame of ev(400): the stretch runs from ev(300) to ev(500)
	data := bytes.Clone(buf.Bytes())
	i := bytes.Index(data, frameMagic[:])
	for n := 0; n < 6; n++ { // the header, ev(100), stats, ev(200), ev(300), stats, then ev(400)
		i += 1 + bytes.Index(data[i+1:], frameMagic[:])
	}
	data[i+frameHeaderLen+2] ^= 0xff
	_, r, err = replay(t, data)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range r.Losses() {
		if l.Damaged > 0 {
			found = l.From == 300 && l.To == 500
		}
	}
	if !found {
		t.Fatalf("damage: losses %+v, warnings %v", r.Losses(), r.Warnings())
	}

	var clean bytes.Buffer
	w, _ = NewWriter(&clean, testMeta(), Options{FlushInterval: -1})
	w.Write(ev(1))
	w.WriteStats(event.Stats{At: 2})
	w.Close()
	if _, r, _ = replay(t, clean.Bytes()); len(r.Losses()) != 0 {
		t.Fatalf("clean: %+v", r.Losses())
	}
}
