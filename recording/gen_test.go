package recording

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// fillRandom sets every field reachable from v to a random value, by
// reflection: a field added to event.Event or to a payload later gets random
// values here too, so the round-trip test fails until the codec carries it.
// A field of a type it does not know panics, for the same reason.
func fillRandom(rng *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 1)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(randBits(rng, v.Type().Bits()))
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Type() == reflect.TypeFor[time.Duration]() {
			v.SetInt(rng.Int64N(int64(time.Hour)) - int64(30*time.Minute))
			return
		}
		bits := v.Type().Bits()
		v.SetInt(int64(randBits(rng, bits)<<(64-bits)) >> (64 - bits))
	case reflect.String:
		b := make([]byte, rng.IntN(20))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		v.SetString(string(b))
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fillRandom(rng, v.Index(i))
		}
	case reflect.Slice:
		n := rng.IntN(5)
		if n == 0 {
			v.SetZero() // the format does not keep nil apart from empty
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := 0; i < n; i++ {
			fillRandom(rng, v.Index(i))
		}
	case reflect.Pointer:
		if rng.IntN(2) == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fillRandom(rng, v.Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			panic("time.Time is set by the caller")
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).Type == reflect.TypeFor[time.Time]() {
				continue
			}
			fillRandom(rng, v.Field(i))
		}
	default:
		panic(fmt.Sprintf("fillRandom: no generator for %s: teach the recording codec and this test about it", v.Type()))
	}
}

// randBits returns a random value of the given width, biased to the edges
// (0, 1, max) and to small values where varints change length.
func randBits(rng *rand.Rand, bits int) uint64 {
	mask := uint64(1)<<bits - 1
	if bits == 64 {
		mask = ^uint64(0)
	}
	switch rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return mask
	case 2:
		return rng.Uint64N(300) & mask
	}
	return rng.Uint64() & mask
}

// randomEvent is an event with every field random, including payload
// combinations no real source produces: the codec must keep them all.
func randomEvent(rng *rand.Rand, meta event.Meta) *event.Event {
	e := new(event.Event)
	fillRandom(rng, reflect.ValueOf(e).Elem())
	switch rng.IntN(4) {
	case 0: // zero time: stays zero
	case 1: // unrelated to Boot
		e.Time = time.Unix(0, int64(rng.Uint64()))
	default: // the usual case: Boot plus the offset
		e.Time = time.Unix(0, int64(e.Boot)+int64(meta.BootOffset))
	}
	return e
}

func randomMeta(rng *rand.Rand) event.Meta {
	var m event.Meta
	fillRandom(rng, reflect.ValueOf(&m).Elem())
	return m
}

func randomStats(rng *rand.Rand) event.Stats {
	var s event.Stats
	fillRandom(rng, reflect.ValueOf(&s).Elem())
	return s
}

// testMeta is a plausible header.
func testMeta() event.Meta {
	return event.Meta{
		Host:       "node-a",
		Kernel:     "6.12.9-amd64",
		BootOffset: 1_700_000_000 * time.Second,
		Version:    "v0.1.0-test",
		Hooks: []event.Hook{
			{Name: "ib_modify_qp", Module: "ib_core", Signal: "modify", Method: event.HookFentry},
			{Name: "cm_lap_handler", Module: "ib_cm", Signal: "lap", Method: event.HookKprobe, Reason: "no BTF for ib_cm"},
			{Name: "ib_mad:ib_mad_send_done_handler", Module: "ib_core", Signal: "mad", Method: event.HookMissing, Reason: "tracepoint absent"},
		},
	}
}

// realistic produces the kind of stream a busy host records: a few devices
// and commands, a pool of QPs, increasing clocks, payloads matching kinds.
type realistic struct {
	rng  *rand.Rand
	meta event.Meta
	seq  uint64
	boot uint64
}

func newRealistic(seed uint64, meta event.Meta) *realistic {
	return &realistic{rng: rand.New(rand.NewPCG(seed, 1)), meta: meta, boot: 3_600_000_000_000}
}

var (
	realComms   = []string{"kworker/u16:3", "rdma_cm", "ib_srp", "nfsd", "mpirun", "ib_write_bw"}
	realDevices = []string{"mlx5_0", "mlx5_1", "mlx4_0"}
)

func (g *realistic) next() *event.Event {
	r := g.rng
	g.seq++
	g.boot += uint64(r.IntN(50_000)) + 1
	e := &event.Event{
		Seq:    g.seq,
		Boot:   g.boot,
		Time:   time.Unix(0, int64(g.boot)+int64(g.meta.BootOffset)),
		CPU:    uint32(r.IntN(16)),
		PID:    uint32(1000 + r.IntN(8)),
		Comm:   realComms[r.IntN(len(realComms))],
		Device: realDevices[r.IntN(len(realDevices))],
		QPN:    uint32(0x100 + r.IntN(200)),
	}
	e.TID = e.PID + uint32(r.IntN(4))
	lid := func() uint16 { return uint16(1 + r.IntN(64)) }
	comm := func() uint32 { return 0x1000_0000 + uint32(r.IntN(256)) }
	switch k := r.IntN(10); {
	case k < 5:
		e.Kind = event.KindModify
		m := &event.Modify{QPType: event.QPTypeRC, Origin: event.OriginKernel, Hook: "ib_modify_qp",
			AttrMask: event.AttrPathMigState, MigState: event.MigState(r.IntN(3))}
		if r.IntN(3) == 0 {
			m.AttrMask |= event.AttrAltPath
			m.Alt = &event.Path{Port: uint32(1 + r.IntN(2)), DLID: lid(), PKeyIndex: 0, Timeout: 14}
		}
		if r.IntN(4) == 0 {
			m.AttrMask |= event.AttrState | event.AttrAV | event.AttrDestQPN
			m.State, m.DestQPN = event.StateRTR, uint32(0x200+r.IntN(200))
			m.Primary = &event.Path{Port: 1, DLID: lid(), IsGlobal: true, DGID: [16]byte{0xfe, 0x80, 15: byte(r.IntN(256))}}
		}
		if r.IntN(4) == 0 {
			m.Origin, m.Hook = event.OriginUser, "ib_modify_qp_with_udata"
			m.UHandle, m.UserHandle = uint32(r.IntN(100)), 0x55d0_0000_0000+uint64(r.IntN(1<<20))*64
		}
		e.Modify = m
	case k < 6:
		e.Kind = event.KindQPEvent
		e.QP = &event.QPEvent{Type: event.EvPathMig, QPType: event.QPTypeRC, Origin: event.OriginKernel, Hook: "__ib_qp_event_handler"}
	case k < 7:
		e.Kind = event.KindMAD
		e.QPN = 1
		e.MAD = &event.MAD{Dir: event.MADDir(1 + r.IntN(2)), MgmtClass: event.MgmtClassCM, Method: 3,
			AttrID: event.CMAttrLAP, TID: r.Uint64(), SLID: lid(), DLID: lid(), Port: 1, MADQPN: 1,
			LocalID: comm(), RemoteID: comm()}
	case k < 8:
		e.Kind = event.KindCMHandler
		e.Handler = &event.CMHandler{AttrID: event.CMAttrLAP, LocalID: comm(), RemoteID: comm(), AltDLID: lid()}
	case k < 9:
		e.Kind = event.KindCMNotify
		e.Notify = &event.CMNotify{Type: event.EvPathMig, CMID: 0xffff_8881_0000_0000 + uint64(r.IntN(1<<16))*512,
			LocalID: comm(), RemoteID: comm()}
	default:
		switch r.IntN(3) {
		case 0:
			e.Kind, e.QPN = event.KindPortEvent, 0
			e.Port = &event.PortEvent{Type: event.EvPortActive, Port: 1}
		case 1:
			e.Kind = event.KindQPCreate
			e.Life = &event.QPLife{QPType: event.QPTypeRC, Origin: event.OriginKernel}
		default:
			e.Kind = event.KindQPDestroy
			e.Life = &event.QPLife{QPType: event.QPTypeRC, Origin: event.OriginKernel}
		}
	}
	return e
}

func realisticEvents(seed uint64, n int) []*event.Event {
	g := newRealistic(seed, testMeta())
	evs := make([]*event.Event, n)
	for i := range evs {
		evs[i] = g.next()
	}
	return evs
}
