package recording

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/event"
)

// written is a recording made in memory, with the file size after each
// flushed step, so tests know where every frame ends without the reader.
type written struct {
	data   []byte
	events []*event.Event
	ends   []int    // ends[i]: file size after events[i] was written
	spans  [][2]int // spans[i]: the frame (or block) holding events[i]
	hdrEnd int      // size of the header frame
}

// writeAll writes evs, flushing after every `every` events, and closes.
func writeAll(t testing.TB, meta event.Meta, opts Options, evs []*event.Event, every int) *written {
	t.Helper()
	var buf bytes.Buffer
	opts.FlushInterval = -1
	w, err := NewWriter(&buf, meta, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := &written{events: evs, hdrEnd: buf.Len()}
	for i, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
		if (i+1)%every == 0 || i == len(evs)-1 {
			start := buf.Len()
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			for len(out.spans) <= i {
				out.spans = append(out.spans, [2]int{start, buf.Len()})
			}
		}
		out.ends = append(out.ends, buf.Len())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out.data = buf.Bytes()
	return out
}

// replay reads data to the end.
func replay(t testing.TB, data []byte) ([]*event.Event, *Reader, error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), "", ReadOptions{})
	if err != nil {
		return nil, nil, err
	}
	var got []*event.Event
	for {
		e, err := r.Next(context.Background())
		if err == io.EOF {
			return got, r, nil
		}
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		got = append(got, e)
	}
}

func randomEvents(seed uint64, n int, meta event.Meta) []*event.Event {
	rng := rand.New(rand.NewPCG(seed, 2))
	evs := make([]*event.Event, n)
	for i := range evs {
		evs[i] = randomEvent(rng, meta)
	}
	return evs
}

func modes() map[string]Options {
	return map[string]Options{"plain": {}, "zstd": {Compress: true, BlockSize: 4 << 10}}
}

func TestRoundTripEveryField(t *testing.T) {
	for name, opts := range modes() {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 1))
			meta := randomMeta(rng)
			var buf bytes.Buffer
			opts.FlushInterval = -1
			w, err := NewWriter(&buf, meta, opts)
			if err != nil {
				t.Fatal(err)
			}
			var want []*event.Event
			var last event.Stats
			for i := 0; i < 3000; i++ {
				e := randomEvent(rng, meta)
				want = append(want, e)
				if err := w.Write(e); err != nil {
					t.Fatal(err)
				}
				if i%500 == 0 {
					last = randomStats(rng)
					if err := w.WriteStats(last); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, r, err := replay(t, buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Meta(), meta) {
				t.Errorf("meta:\n got %+v\nwant %+v", r.Meta(), meta)
			}
			if len(got) != len(want) {
				t.Fatalf("read %d events, wrote %d", len(got), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("event %d:\n got %s\nwant %s", i, dump(got[i]), dump(want[i]))
				}
			}
			if !reflect.DeepEqual(r.Stats(), last) {
				t.Errorf("stats: got %+v, want %+v", r.Stats(), last)
			}
			if len(r.Warnings()) != 0 {
				t.Errorf("warnings on a clean file: %v", r.Warnings())
			}
		})
	}
}

// TestGeneratorCoversEveryKind guards the round-trip test: the random
// events carry every payload, both paths, and zero and non-zero times.
func TestGeneratorCoversEveryKind(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range randomEvents(1, 500, testMeta()) {
		v := reflect.ValueOf(e).Elem()
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
				seen[v.Type().Field(i).Name] = true
			}
		}
		if e.Modify != nil && e.Modify.Primary != nil && e.Modify.Alt != nil {
			seen["both paths"] = true
		}
		seen["zero time "+map[bool]string{true: "yes", false: "no"}[e.Time.IsZero()]] = true
	}
	for _, k := range []string{"Modify", "QP", "Port", "Notify", "Handler", "MAD", "Life", "Truth", "both paths", "zero time yes", "zero time no"} {
		if !seen[k] {
			t.Errorf("generator never produced %s", k)
		}
	}
}

func dump(e *event.Event) string {
	s := fmt.Sprintf("%+v", *e)
	for _, p := range []any{e.Modify, e.QP, e.Port, e.Notify, e.Handler, e.MAD, e.Life, e.Truth} {
		s += fmt.Sprintf(" %+v", p)
	}
	if e.Modify != nil {
		s += fmt.Sprintf(" primary %+v alt %+v", e.Modify.Primary, e.Modify.Alt)
	}
	return s
}

func TestWriterEncodesLargeModify(t *testing.T) {
	// A modify with both paths and a long hook name needs multi-byte
	// lengths: the length placeholders must move the data right.
	e := &event.Event{Seq: 1, Kind: event.KindModify, Comm: strings.Repeat("c", 200), Modify: &event.Modify{
		Hook:    strings.Repeat("h", 300),
		Primary: &event.Path{DGID: [16]byte{1, 2, 3}, IsGlobal: true, Port: 1 << 31},
		Alt:     &event.Path{DGID: [16]byte{15: 9}, DLID: 0xffff},
	}}
	w := writeAll(t, testMeta(), Options{}, []*event.Event{e}, 1)
	got, _, err := replay(t, w.data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !reflect.DeepEqual(got[0], e) {
		t.Fatalf("got %v", got)
	}
}

// TestModifyRefusedByUverbsRoundTrips: the alternate address vector's
// port of a modify ib_uverbs refused survives a recording.
func TestModifyRefusedByUverbsRoundTrips(t *testing.T) {
	e := &event.Event{Seq: 1, Kind: event.KindModify, Device: "ibsim0", QPN: 17, Modify: &event.Modify{
		Hook: "ib_uverbs_modify_qp", AttrMask: event.AttrAltPath, Ret: -22,
		Alt: &event.Path{Port: 2, DLID: 3}, AltAHPort: 0x1_0000,
	}}
	w := writeAll(t, testMeta(), Options{}, []*event.Event{e}, 1)
	got, _, err := replay(t, w.data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !reflect.DeepEqual(got[0], e) {
		t.Fatalf("got %v, want %v", got, e)
	}
}

// TestModifyPathBitsRoundTrip: the source path bits of a modify's paths
// (an LMC path) survive a recording, with and without an alternate
// address vector port before them, and a modify with neither reads 0.
func TestModifyPathBitsRoundTrip(t *testing.T) {
	evs := []*event.Event{
		{Seq: 1, Kind: event.KindModify, Device: "ibsim0", QPN: 17, Modify: &event.Modify{
			Hook: "ib_modify_qp_with_udata", AttrMask: event.AttrAltPath | event.AttrAV,
			Primary: &event.Path{Port: 1, DLID: 6}, Alt: &event.Path{Port: 1, DLID: 7, SrcPathBits: 1}}},
		{Seq: 2, Kind: event.KindModify, Device: "ibsim0", QPN: 17, Modify: &event.Modify{
			Hook: "ib_uverbs_modify_qp", AttrMask: event.AttrAltPath, Ret: -22,
			Alt: &event.Path{Port: 2, DLID: 9, SrcPathBits: 3}, AltAHPort: 1}},
		{Seq: 3, Kind: event.KindModify, Device: "ibsim0", QPN: 17, Modify: &event.Modify{
			Hook: "ib_modify_qp", AttrMask: event.AttrAV, Primary: &event.Path{Port: 2, DLID: 8, SrcPathBits: 2}}},
		{Seq: 4, Kind: event.KindModify, Device: "ibsim0", QPN: 17, Modify: &event.Modify{
			Hook: "ib_modify_qp", AttrMask: event.AttrAltPath, Alt: &event.Path{Port: 2, DLID: 8}}},
	}
	w := writeAll(t, testMeta(), Options{}, evs, 1)
	got, _, err := replay(t, w.data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(evs) {
		t.Fatalf("got %d events, want %d", len(got), len(evs))
	}
	for i := range evs {
		if !reflect.DeepEqual(got[i], evs[i]) {
			t.Errorf("event %d: got %+v, want %+v", i, got[i].Modify, evs[i].Modify)
		}
	}
}

func TestStatsFollowThePosition(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testMeta(), Options{FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	g := newRealistic(3, testMeta())
	for i := 1; i <= 3; i++ {
		if err := w.Write(g.next()); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteStats(event.Stats{Events: uint64(i), Lost: uint64(10 * i), LostPerCPU: []uint64{uint64(i), 0, uint64(9 * i)}, Missed: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	r, err := NewReader(&buf, "", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The stats record after event i is read when event i+1 is asked for.
	for i := 0; i <= 3; i++ {
		if want := uint64(10 * max(i-1, 0)); r.Stats().Lost != want {
			t.Errorf("after %d events, lost = %d, want %d", i, r.Stats().Lost, want)
		}
		r.Next(context.Background())
	}
	if got := r.Stats(); got.Events != 3 || got.Lost != 30 || got.Missed != 3 || !reflect.DeepEqual(got.LostPerCPU, []uint64{3, 0, 27}) {
		t.Errorf("final stats %+v", got)
	}
	// Probes the kernel skipped are losses of the replay too, placed in
	// time like the ring's: 30 + 3 in all.
	var lost uint64
	for _, l := range r.Losses() {
		lost += l.Lost
	}
	if lost != 33 {
		t.Errorf("losses %+v: %d lost in all, want 33 (the ring's 30 and the kernel's 3 missed)", r.Losses(), lost)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeAll(t, testMeta(), Options{}, randomEvents(1, 3, testMeta()), 1)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newer := bytes.Clone(good.data)
	newer[frameHeaderLen], newer[frameHeaderLen+2] = 2, 2 // version, compat
	finishFrame(newer[:good.hdrEnd], 0)
	damaged := bytes.Clone(good.data)
	damaged[frameHeaderLen+5] ^= 1
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "no header: empty file"},
		{"text", []byte("hello, this is not a recording\n"), "not an apmwatch recording"},
		{"cut", good.data[:good.hdrEnd-3], "no header: file cut inside the header"},
		{"damaged", damaged, "damaged header (checksum mismatch)"},
		{"newer", newer, "format version 2 needs a newer apmwatch (this one reads version 1)"},
	} {
		p := write(tc.name, tc.data)
		_, err := Open(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), p+": ") {
			t.Errorf("%s: got error %v, want one naming the file and saying %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", tc.name, err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open(); err == nil {
		t.Error("Open() with no file succeeded")
	}
}

func TestContextAndClose(t *testing.T) {
	w := writeAll(t, testMeta(), Options{}, randomEvents(1, 3, testMeta()), 1)
	r, err := NewReader(bytes.NewReader(w.data), "x", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("next with a cancelled context: %v", err)
	}
	r.Close()
	if _, err := r.Next(context.Background()); err == nil {
		t.Error("next after close succeeded")
	}
}

func TestWriteAfterClose(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "r"), testMeta(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&event.Event{}); err == nil {
		t.Error("write after close succeeded")
	}
	if err := w.Close(); err == nil {
		t.Error("second close succeeded")
	}
}
