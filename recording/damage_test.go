package recording

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/event"
)

// TestTruncatedEverywhere cuts a recording at every offset and checks that
// the reader keeps exactly the events whose frames are whole, with exactly
// one warning naming the offset where the first incomplete frame starts.
func TestTruncatedEverywhere(t *testing.T) {
	for name, every := range map[string]int{"plain": 1, "zstd": 5} {
		t.Run(name, func(t *testing.T) {
			opts := Options{}
			if name == "zstd" {
				opts = Options{Compress: true}
			}
			evs := realisticEvents(7, 40)
			w := writeAll(t, testMeta(), opts, evs, every)
			for cut := 0; cut <= len(w.data); cut++ {
				got, r, err := replay(t, w.data[:cut])
				if cut < w.hdrEnd {
					if !errors.Is(err, errNoHeader) {
						t.Fatalf("cut at %d (inside the header): error %v", cut, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("cut at %d: %v", cut, err)
				}
				// Whole frames: the events flushed by the last end <= cut.
				keep, frameEnd := 0, w.hdrEnd
				for i, sp := range w.spans {
					if sp[1] <= cut {
						keep, frameEnd = i+1, sp[1]
					}
				}
				if !reflect.DeepEqual(got, evs[:keep]) && !(keep == 0 && len(got) == 0) {
					t.Fatalf("cut at %d: read %d events, want the first %d", cut, len(got), keep)
				}
				ws := r.Warnings()
				if cut == len(w.data) {
					if len(ws) != 0 {
						t.Fatalf("whole file: warnings %v", ws)
					}
					continue
				}
				if len(ws) != 1 {
					t.Fatalf("cut at %d: %d warnings, want 1: %v", cut, len(ws), ws)
				}
				// The end record follows the last event frame; a cut in it
				// or right before it leaves all events but no end.
				if cut >= w.ends[len(w.ends)-1] {
					frameEnd = w.ends[len(w.ends)-1]
				}
				if ws[0].Offset != int64(frameEnd) {
					t.Fatalf("cut at %d: warning at offset %d, want %d: %v", cut, ws[0].Offset, frameEnd, ws[0])
				}
				if cut > frameEnd && !strings.Contains(ws[0].Msg, "file cut inside a frame") ||
					cut == frameEnd && !strings.Contains(ws[0].Msg, "no end record") {
					t.Fatalf("cut at %d: warning %q", cut, ws[0])
				}
			}
		})
	}
}

// TestBitFlips flips every bit after the header, one at a time: the reader
// loses exactly the frame holding the flip, warns, and keeps the rest.
func TestBitFlips(t *testing.T) {
	for name, every := range map[string]int{"plain": 1, "zstd": 4} {
		t.Run(name, func(t *testing.T) {
			opts := Options{}
			if name == "zstd" {
				opts = Options{Compress: true}
			}
			evs := realisticEvents(9, 16)
			w := writeAll(t, testMeta(), opts, evs, every)
			lastEvent := w.ends[len(w.ends)-1]
			for bit := 0; bit < len(w.data)*8; bit++ {
				data := bytes.Clone(w.data)
				at := bit / 8
				data[at] ^= 1 << (bit % 8)
				got, r, err := replay(t, data)
				if at < w.hdrEnd {
					if err == nil {
						t.Fatalf("flip in the header at byte %d: no error", at)
					}
					continue
				}
				if err != nil {
					t.Fatalf("flip at byte %d: %v", at, err)
				}
				// The damaged frame is the one whose span holds the flip.
				var want []*event.Event
				for i, sp := range w.spans {
					if at < sp[0] || at >= sp[1] {
						want = append(want, evs[i])
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("flip at byte %d: read %d events, want %d", at, len(got), len(want))
				}
				if len(r.Warnings()) == 0 {
					t.Fatalf("flip at byte %d: no warning", at)
				}
				if at < lastEvent && r.Stats().DecodeErrs == 0 {
					t.Fatalf("flip at byte %d: DecodeErrs not counted", at)
				}
			}
		})
	}
}

// TestDamageInTheMiddle overwrites a stretch with garbage: the reader
// resynchronises on the next frame and says how much it skipped.
func TestDamageInTheMiddle(t *testing.T) {
	evs := randomEvents(11, 100, testMeta())
	w := writeAll(t, testMeta(), Options{}, evs, 1)
	data := bytes.Clone(w.data)
	from, to := w.ends[9]+5, w.ends[19]+3 // inside frames 11 and 21
	for i := from; i < to; i++ {
		data[i] = byte(i * 7)
	}
	got, r, err := replay(t, data)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]*event.Event{}, evs[:10]...), evs[21:]...)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read %d events, want %d", len(got), len(want))
	}
	ws := r.Warnings()
	wantMsg := fmt.Sprintf("skipped %d bytes to the next frame at offset %d", w.ends[20]-w.ends[9], w.ends[20])
	if len(ws) < 1 || ws[0].Offset != int64(w.ends[9]) || !strings.Contains(ws[0].Msg, wantMsg) {
		t.Fatalf("warnings %v, want one at %d saying %q", ws, w.ends[9], wantMsg)
	}
	if !strings.Contains(ws[len(ws)-1].Msg, "end record counts 100 events and 0 stats, 89 and 0 were read") {
		t.Errorf("last warning %v", ws[len(ws)-1])
	}
}

// TestUnknownTypesSkipped inserts frames and records a newer writer might
// produce: they are skipped with one warning per type, the rest is read.
func TestUnknownTypesSkipped(t *testing.T) {
	evs := randomEvents(12, 6, testMeta())
	w := writeAll(t, testMeta(), Options{}, evs, 1)
	var extra []byte
	for i := 0; i < 2; i++ {
		s := len(extra)
		extra = beginFrame(extra, 'X')
		extra = append(extra, "future frame"...)
		finishFrame(extra, s)
		s = len(extra)
		extra = beginFrame(extra, frameRecords)
		extra = append(extra, 77, 3, 'a', 'b', 'c')
		finishFrame(extra, s)
	}
	data := append(append(bytes.Clone(w.data[:w.ends[2]]), extra...), w.data[w.ends[2]:]...)
	got, r, err := replay(t, data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, evs) {
		t.Fatalf("read %d events, want %d", len(got), len(evs))
	}
	ws := r.Warnings()
	if len(ws) != 2 || !strings.Contains(ws[0].Msg, `unknown type 'X'`) || !strings.Contains(ws[1].Msg, "unknown type 77") {
		t.Fatalf("warnings %v", ws)
	}
	if ws[0].Offset != int64(w.ends[2]) {
		t.Errorf("warning offset %d, want %d", ws[0].Offset, w.ends[2])
	}
}

// TestFieldsAddedLaterIgnored: bytes after the known fields of an event, and
// a payload of a kind this version does not know, are ignored.
func TestFieldsAddedLaterIgnored(t *testing.T) {
	for i, e := range randomEvents(13, 200, testMeta()) {
		rec := appendEvent(nil, e, 5)
		d := dec{b: rec[1:]}
		body := d.bytes(d.uvarint())
		bd := dec{b: body}
		flags := bd.uvarint()
		rest := bd.b
		var newer []byte
		newer = binary.AppendUvarint(newer, flags|1<<9) // bit 8 is Truth: the next payload kind
		newer = append(newer, rest...)
		newer = append(newer, 4, 1, 2, 3, 4) // the unknown payload
		got, err := decodeEvent(newer, 5, nil)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("event %d: got %s, want %s", i, dump(got), dump(e))
		}
	}
}

// TestCorruptRecordInAValidFrame: a record that does not decode although its
// frame checks out (a writer bug) is skipped on its own.
func TestCorruptRecordInAValidFrame(t *testing.T) {
	evs := randomEvents(14, 3, testMeta())
	w := writeAll(t, testMeta(), Options{}, evs, 1)
	var bad []byte
	bad = beginFrame(bad, frameRecords)
	bad = append(bad, recEvent, 2, 0x80, 0x80) // a varint that never ends
	finishFrame(bad, 0)
	data := append(append(bytes.Clone(w.data[:w.ends[0]]), bad...), w.data[w.ends[0]:]...)
	got, r, err := replay(t, data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, evs) {
		t.Fatalf("read %d events", len(got))
	}
	if ws := r.Warnings(); len(ws) != 1 || !strings.Contains(ws[0].Msg, "event record does not decode") {
		t.Fatalf("warnings %v", ws)
	}
	if r.Stats().DecodeErrs != 1 {
		t.Errorf("DecodeErrs %d", r.Stats().DecodeErrs)
	}
}
