package output

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/testkit"
)

// hostileStrings are names a host or a crafted recording may hold: every
// byte that JSON or the terminal escapes, invalid UTF-8, the separators
// and bidirectional controls, HTML's specials.
var hostileStrings = []string{
	"", "rxe0", "mlx5_0", "lab-pair", "kworker/u16:1", hostile,
	"\x00\x01\x07\x08\x09\x0a\x0b\x0c\x0d\x1b\x1f\x7f", `"quoted" \back\slash\`, "<script>&amp;</script>",
	"\xff\xfe\xc3", "a\xc3(b", "\u2028\u2029", "\u202e\u2066bidi\u2069", "\u0085\u009b[2J", "ünïcödé ✓ 漢字 🚀",
	"\xed\xa0\x80", "\xf4\x90\x80\x80", strings.Repeat("long/", 200),
}

func pick[T any](rng *rand.Rand, vs ...T) T { return vs[rng.IntN(len(vs))] }

func randomString(rng *rand.Rand) string {
	if rng.IntN(4) == 0 {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return string(b)
	}
	return pick(rng, hostileStrings...)
}

func randomPath(rng *rand.Rand) *event.Path {
	if rng.IntN(3) == 0 {
		return nil
	}
	p := &event.Path{Port: pick(rng, 0, 1, 2, rng.Uint32()), DLID: uint16(rng.Uint32()), SGIDIndex: uint8(rng.Uint32()),
		IsGlobal: rng.IntN(2) == 0, PKeyIndex: uint16(rng.Uint32()), Timeout: uint8(rng.Uint32())}
	switch rng.IntN(4) {
	case 0:
	case 1:
		p.DGID = [16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 168, 14: byte(rng.Uint32()), 15: 2}
	case 2:
		p.DGID = [16]byte{0: 0xfe, 1: 0x80, 15: 1}
	default:
		for i := range p.DGID {
			p.DGID[i] = byte(rng.Uint32())
		}
	}
	return p
}

func randomRet(rng *rand.Rand) int32 {
	return pick(rng, 0, 0, -22, -110, -106, -1, -4095, -9999, 1, int32(rng.Uint32()))
}

func randomTime(rng *rand.Rand) time.Time {
	switch rng.IntN(6) {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(0, int64(rng.Uint64()>>1)) // up to 2262
	case 2:
		return time.Date(10000+rng.IntN(1000), 1, 1, 0, 0, 0, rng.IntN(1e9), time.UTC)
	case 3:
		return time.Date(-rng.IntN(100), 1, 1, 0, 0, 0, 0, time.FixedZone("X", 3600))
	case 4:
		return time.Unix(1_790_000_000, int64(rng.IntN(1e9))).In(time.FixedZone("CET", 3600))
	}
	return time.Unix(1_790_000_000+rng.Int64N(1e6), int64(rng.IntN(1000))*1000)
}

// randomEvent has any mix of payloads (usually the one its kind says,
// sometimes none, sometimes several), every field drawn from values with a
// special form (zero, unknown enum values, negative returns with and
// without an errno name) and hostile strings.
func randomEvent(rng *rand.Rand) *event.Event {
	e := &event.Event{Seq: pick(rng, 0, 1, rng.Uint64()), Kind: event.Kind(rng.IntN(12)), Boot: rng.Uint64(),
		Time: randomTime(rng), CPU: rng.Uint32(), PID: pick(rng, 0, rng.Uint32()), TID: rng.Uint32(),
		Comm: randomString(rng), Device: randomString(rng), QPN: pick(rng, 0, 1, rng.Uint32())}
	set := 1 << rng.IntN(9) // one payload, or (bit 8) none
	if rng.IntN(8) == 0 {
		set = rng.IntN(256)
	}
	if set&1 != 0 {
		e.Modify = &event.Modify{QPType: event.QPType(pick(rng, 2, 3, 4, 9, 10, 0, rng.IntN(256))),
			Origin: event.Origin(rng.IntN(4)), UHandle: rng.Uint32(), UserHandle: rng.Uint64(),
			AttrMask: pick(rng, 0, event.AttrState|event.AttrAV|event.AttrDestQPN, event.AttrAltPath|event.AttrPathMigState, rng.Uint32()),
			State:    event.QPState(rng.IntN(9)), MigState: event.MigState(rng.IntN(5)), DestQPN: rng.Uint32(),
			Primary: randomPath(rng), Alt: randomPath(rng), Ret: randomRet(rng), AltAHPort: rng.Uint32(),
			Hook: pick(rng, randomString(rng), "ib_uverbs_modify_qp", "ib_uverbs_ex_modify_qp")}
	}
	if set&2 != 0 {
		e.QP = &event.QPEvent{Type: event.EventType(rng.IntN(24)), QPType: event.QPType(rng.IntN(12)),
			Origin: event.Origin(rng.IntN(4)), Hook: randomString(rng)}
	}
	if set&4 != 0 {
		e.Port = &event.PortEvent{Type: event.EventType(rng.IntN(256)), Port: rng.Uint32()}
	}
	if set&8 != 0 {
		e.Notify = &event.CMNotify{Type: event.EventType(rng.IntN(24)), Ret: randomRet(rng), CMID: rng.Uint64(),
			LocalID: rng.Uint32(), RemoteID: rng.Uint32(), CMState: uint8(rng.IntN(20)), LapState: uint8(rng.IntN(8))}
	}
	if set&16 != 0 {
		e.Handler = &event.CMHandler{AttrID: pick(rng, event.CMAttrLAP, event.CMAttrAPR, uint16(rng.Uint32())),
			Ret: randomRet(rng), LocalID: rng.Uint32(), RemoteID: rng.Uint32(), AltDLID: uint16(rng.Uint32()), Status: uint8(rng.Uint32())}
	}
	if set&32 != 0 {
		e.MAD = &event.MAD{Dir: event.MADDir(rng.IntN(4)), MgmtClass: pick(rng, event.MgmtClassCM, uint8(rng.Uint32())),
			Method: uint8(rng.Uint32()), AttrID: pick(rng, event.CMAttrREQ, event.CMAttrLAP, uint16(rng.Uint32())), TID: rng.Uint64(),
			SLID: uint16(rng.Uint32()), DLID: uint16(rng.Uint32()), Port: rng.Uint32(), MADQPN: rng.Uint32(),
			FromUser: rng.IntN(2) == 0, LocalID: rng.Uint32(), RemoteID: rng.Uint32()}
	}
	if set&64 != 0 {
		e.Life = &event.QPLife{QPType: event.QPType(rng.IntN(12)), Origin: event.Origin(rng.IntN(4)), Ret: randomRet(rng)}
	}
	if set&128 != 0 {
		e.Truth = &event.Truth{Op: event.TruthOp(rng.IntN(4)), Source: randomString(rng), QPType: event.QPType(rng.IntN(12)),
			Origin: event.Origin(rng.IntN(4)), State: event.QPState(rng.IntN(9)), HasState: rng.IntN(2) == 0,
			Mig: event.MigState(rng.IntN(4)), RQPN: pick(rng, 0, rng.Uint32()), CM: rng.IntN(2) == 0, Span: pick(rng, 0, rng.Uint64())}
	}
	return e
}

// sameAsReference fails unless the writer gives e the bytes the reflective
// encoder gave it.
func sameAsReference(t *testing.T, e *event.Event) {
	t.Helper()
	var got, want bytes.Buffer
	if err := NewJSONWriter(&got).Write(e); err != nil {
		t.Fatal(err)
	}
	if err := newRefWriter(&want).Write(e); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("event %+v\nencoder:   %s\nreference: %s", e, got.Bytes(), want.Bytes())
	}
	if !json.Valid(got.Bytes()) {
		t.Fatalf("not JSON: %s", got.Bytes())
	}
}

// TestJSONMatchesReference: the encoder gives byte for byte the line the
// reflective encoder gave, for the documented samples, their hostile
// versions and 50,000 random events of every kind.
func TestJSONMatchesReference(t *testing.T) {
	for _, e := range sample() {
		sameAsReference(t, e)
	}
	for _, e := range hostileEvents() {
		e.Device = hostile
		sameAsReference(t, e)
	}
	sameAsReference(t, &event.Event{})
	rng := rand.New(rand.NewPCG(14, 300))
	for range 50000 {
		sameAsReference(t, randomEvent(rng))
	}
}

// FuzzJSON: any event built from the fuzzer's strings and numbers encodes
// to the reference's bytes. `make fuzz-json` runs it for a while.
func FuzzJSON(f *testing.F) {
	f.Add(uint8(1), "lab-pair", "rxe0", "ib_modify_qp", uint64(0x4000|0x40000), uint64(1), int32(-22))
	f.Add(uint8(2), hostile, "\xff", "<&>", uint64(6), uint64(0), int32(0))
	f.Add(uint8(9), "", "", "netlink", uint64(3), uint64(1<<40), int32(1))
	f.Fuzz(func(t *testing.T, kind uint8, comm, dev, str string, a, b uint64, ret int32) {
		e := &event.Event{Seq: a, Kind: event.Kind(kind), Boot: b, Time: time.Unix(0, int64(a^b)), CPU: uint32(a),
			PID: uint32(b), TID: uint32(a >> 32), Comm: comm, Device: dev, QPN: uint32(b >> 32)}
		p := &event.Path{Port: uint32(a), DLID: uint16(b), DGID: [16]byte{0: byte(a), 10: byte(b), 15: byte(a >> 8)}, IsGlobal: a&1 != 0}
		switch kind % 10 {
		case 0:
		case 1:
			e.Modify = &event.Modify{QPType: event.QPType(a), Origin: event.Origin(b % 4), UHandle: uint32(b), UserHandle: a,
				AttrMask: uint32(a), State: event.QPState(b), MigState: event.MigState(b >> 8), DestQPN: uint32(b), Ret: ret, Hook: str}
			if a&2 != 0 {
				e.Modify.Primary = p
			}
			if a&4 != 0 {
				e.Modify.Alt = p
			}
		case 2:
			e.QP = &event.QPEvent{Type: event.EventType(a), QPType: event.QPType(b), Origin: event.Origin(a >> 8 % 4), Hook: str}
		case 3:
			e.Port = &event.PortEvent{Type: event.EventType(a), Port: uint32(b)}
		case 4:
			e.Notify = &event.CMNotify{Type: event.EventType(a), Ret: ret, CMID: b, LocalID: uint32(a), RemoteID: uint32(b),
				CMState: uint8(a >> 8), LapState: uint8(b >> 8)}
		case 5:
			e.Handler = &event.CMHandler{AttrID: uint16(a), Ret: ret, LocalID: uint32(b), RemoteID: uint32(a), AltDLID: uint16(b), Status: uint8(a)}
		case 6:
			e.MAD = &event.MAD{Dir: event.MADDir(a % 4), MgmtClass: uint8(b), Method: uint8(a), AttrID: uint16(b >> 8), TID: a,
				SLID: uint16(a), DLID: uint16(b), Port: uint32(a), MADQPN: uint32(b), FromUser: a&1 != 0, LocalID: uint32(b), RemoteID: uint32(a)}
		case 7, 8:
			e.Life = &event.QPLife{QPType: event.QPType(a), Origin: event.Origin(b % 4), Ret: ret}
		case 9:
			e.Truth = &event.Truth{Op: event.TruthOp(a % 4), Source: str, QPType: event.QPType(b), Origin: event.Origin(a % 4),
				State: event.QPState(b >> 8), HasState: b&1 != 0, Mig: event.MigState(a >> 8), RQPN: uint32(b), CM: a&2 != 0, Span: b}
		}
		sameAsReference(t, e)
	})
}

// BenchmarkJSON: one event to a JSON line, through the reflective encoder
// (before) and the encoder (after), side by side in one run. "modify" is
// the documented sample with an alternate path; "storm" cycles through
// the samples of every kind.
func BenchmarkJSON(b *testing.B) {
	writers := []struct {
		name string
		w    func(io.Writer) interface{ Write(*event.Event) error }
	}{
		{"before", func(w io.Writer) interface{ Write(*event.Event) error } { return newRefWriter(w) }},
		{"after", func(w io.Writer) interface{ Write(*event.Event) error } { return NewJSONWriter(w) }},
	}
	inputs := []struct {
		name string
		es   []*event.Event
	}{{"modify", sample()[2:3]}, {"every-kind", sample()}}
	// One write(2) per line, as trace writes to its standard output.
	b.Run("modify/after-to-dev-null", func(b *testing.B) {
		f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		w, e := NewJSONWriter(f), sample()[2]
		b.ReportAllocs()
		cpu := testkit.CPUTime()
		for b.Loop() {
			if err := w.Write(e); err != nil {
				b.Fatal(err)
			}
		}
		testkit.ReportCPU(b, cpu)
	})
	for _, in := range inputs {
		for _, wr := range writers {
			b.Run(in.name+"/"+wr.name, func(b *testing.B) {
				w := wr.w(io.Discard)
				b.ReportAllocs()
				cpu := testkit.CPUTime()
				for i := 0; b.Loop(); i++ {
					if err := w.Write(in.es[i%len(in.es)]); err != nil {
						b.Fatal(err)
					}
				}
				testkit.ReportCPU(b, cpu)
			})
		}
	}
}

// TestNamesNeedNoEscape: every name the encoder writes without escaping
// (enums, errno names, CM states and attributes, for every value their
// types can hold) is a JSON string as it is.
func TestNamesNeedNoEscape(t *testing.T) {
	var names []string
	for v := range 256 {
		names = append(names, event.Kind(v).String(), event.QPType(v).String(), event.Origin(v).String(),
			event.QPState(v).String(), event.MigState(v).String(), event.EventType(v).String(), event.MADDir(v).String(),
			event.TruthOp(v).String(), CMState(uint8(v)), LapState(uint8(v)))
	}
	for v := range 1 << 16 {
		names = append(names, event.CMAttrName(uint16(v)), madAttr(&event.MAD{MgmtClass: 1, AttrID: uint16(v)}))
	}
	for ret := int32(-5000); ret < 0; ret++ {
		names = append(names, Errno(ret))
	}
	for _, n := range names {
		if got := string(appendJSONString(nil, n)); got != `"`+n+`"` {
			t.Fatalf("name %q needs escaping: %s", n, got)
		}
	}
}

// TestTimeCache: times in one second and across seconds, with and without
// a fraction, in any zone, as time.RFC3339Nano writes them in UTC.
func TestTimeCache(t *testing.T) {
	var tc timeCache
	rng := rand.New(rand.NewPCG(3, 4))
	base := time.Unix(1_790_000_000, 0)
	for range 100000 {
		var tm time.Time
		switch rng.IntN(4) {
		case 0:
			tm = base.Add(time.Duration(rng.IntN(3e9)))
		case 1:
			tm = base.Add(time.Duration(rng.IntN(3)) * time.Second)
		case 2:
			tm = randomTime(rng)
		default:
			tm = base.Add(time.Duration(rng.IntN(3e6)) * time.Microsecond).In(time.FixedZone("X", -7200))
		}
		if got, want := string(tc.append(nil, tm)), tm.UTC().Format(time.RFC3339Nano); got != want {
			t.Fatalf("%v: %s, want %s", tm, got, want)
		}
	}
}
