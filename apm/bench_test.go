package apm_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
)

// stream writes synthetic events into a ring that is larger than what the
// reorder window can hold, so events are reused only after the model let go
// of them.
type stream struct {
	ring []event.Event
	mods []event.Modify
	qpev []event.QPEvent
	life []event.QPLife
	seq  uint64
	boot uint64
	gap  uint64
}

func newStream(gap time.Duration) *stream {
	const n = 1 << 17 // > 50 ms window / 1 µs
	return &stream{ring: make([]event.Event, n), mods: make([]event.Modify, n),
		qpev: make([]event.QPEvent, n), life: make([]event.QPLife, n), boot: uint64(time.Second), gap: uint64(gap)}
}

var (
	benchA = event.Path{Port: 1, DLID: 0x11}
	benchB = event.Path{Port: 2, DLID: 0x22}
	benchC = event.Path{Port: 1, DLID: 0x33}
)

// step fills the next event with step s (0..7) of a QP's life: create,
// INIT, RTR with primary and alternate, RTS with REARM, PATH_MIG,
// MVAPICH2's load+rearm, COMM_EST, destroy.
func (st *stream) step(qpn uint32, s int) *event.Event {
	i := st.seq & uint64(len(st.ring)-1)
	st.seq++
	st.boot += st.gap
	ev := &st.ring[i]
	*ev = event.Event{Seq: st.seq, Boot: st.boot, PID: 77, TID: 77, Comm: "bench", Device: "mlx5_0", QPN: qpn}
	md := &st.mods[i]
	*md = event.Modify{QPType: event.QPTypeRC, Origin: event.OriginUser}
	switch s {
	case 0, 7:
		ev.Kind = event.KindQPCreate
		if s == 7 {
			ev.Kind = event.KindQPDestroy
		}
		st.life[i] = event.QPLife{QPType: event.QPTypeRC}
		ev.Life = &st.life[i]
	case 1:
		ev.Kind, ev.Modify = event.KindModify, md
		md.AttrMask, md.State = event.AttrState, event.StateInit
	case 2:
		ev.Kind, ev.Modify = event.KindModify, md
		md.AttrMask = event.AttrState | event.AttrAV | event.AttrAltPath
		md.State, md.Primary, md.Alt = event.StateRTR, &benchA, &benchB
	case 3:
		ev.Kind, ev.Modify = event.KindModify, md
		md.AttrMask, md.State, md.MigState = event.AttrState|event.AttrPathMigState, event.StateRTS, event.MigRearm
	case 4, 6:
		ev.Kind = event.KindQPEvent
		st.qpev[i] = event.QPEvent{Type: event.EvPathMig, QPType: event.QPTypeRC}
		if s == 6 {
			st.qpev[i].Type = event.EvCommEst
		}
		ev.QP = &st.qpev[i]
	case 5:
		ev.Kind, ev.Modify = event.KindModify, md
		md.AttrMask, md.Alt, md.MigState = event.AttrAltPath|event.AttrPathMigState, &benchC, event.MigRearm
	}
	return ev
}

// benchModel is a stream and a model for the throughput benchmarks, with
// the timer reset; *found counts findings.
func benchModel(b *testing.B) (*stream, *apm.Model, *int) {
	st := newStream(time.Microsecond)
	found := new(int)
	m, err := apm.New(apm.DefaultConfig(), func(apm.Finding) { *found++ })
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	return st, m, found
}

// BenchmarkModelEvents: events per second through reorder stage and model
// on one goroutine, 4096 QPs living through create, connect with an
// alternate, migration, MVAPICH2 rearm, COMM_EST and destroy, interleaved.
func BenchmarkModelEvents(b *testing.B) {
	const qps = 4096
	st, m, found := benchModel(b)
	for i := range b.N {
		q := i % qps
		s := (i / qps) % 8
		m.Handle(st.step(uint32(1000+q), s))
	}
	m.Finish(m.Now())
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if *found != 0 {
		b.Fatalf("%d findings from a healthy stream", *found)
	}
}

func heapAlloc() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// connectQPs brings n QPs to RTS with an armed alternate (create, INIT,
// RTR with AV and ALT_PATH, RTS with REARM) and lets every deadline pass.
func connectQPs(m *apm.Model, st *stream, first, n int) {
	for q := first; q < first+n; q++ {
		for s := range 4 {
			m.Handle(st.step(uint32(q), s))
		}
	}
	m.Advance(st.boot + uint64(time.Hour))
	st.boot += uint64(time.Hour)
}

// BenchmarkBytesPerQP: heap bytes per tracked QP with one million QPs in
// RTS with an armed alternate (runtime.MemStats.HeapAlloc after GC).
func BenchmarkBytesPerQP(b *testing.B) {
	const n = 1 << 20
	for range b.N {
		st := newStream(time.Microsecond)
		before := heapAlloc()
		m, err := apm.New(apm.DefaultConfig(), nil)
		if err != nil {
			b.Fatal(err)
		}
		connectQPs(m, st, 1, n)
		after := heapAlloc()
		if got := m.Stats().QPs; got != n {
			b.Fatalf("%d QPs tracked, want %d", got, n)
		}
		runtime.KeepAlive(st) // the event ring is not the model's
		b.ReportMetric(float64(after-before)/n, "B/qp")
		runtime.KeepAlive(m)
	}
}

// BenchmarkChurn: ten rounds of 100k QPs created, migrated, rearmed and
// destroyed; reports the heap growth from round 2 to round 10 (it must stay
// near zero: destroyed QPs leave nothing behind).
func BenchmarkChurn(b *testing.B) {
	const n, rounds = 100_000, 10
	for range b.N {
		st := newStream(time.Microsecond)
		m, err := apm.New(apm.DefaultConfig(), nil)
		if err != nil {
			b.Fatal(err)
		}
		var at2 uint64
		for r := range rounds {
			churn(m, st, n)
			if r == 1 {
				at2 = heapAlloc()
			}
		}
		end := heapAlloc()
		b.ReportMetric(float64(int64(end)-int64(at2)), "B-growth")
		if m.Stats().QPs != 0 {
			b.Fatalf("%d QPs left", m.Stats().QPs)
		}
		runtime.KeepAlive(m)
		runtime.KeepAlive(st)
	}
}

func churn(m *apm.Model, st *stream, n int) {
	for s := range 8 {
		for q := range n {
			m.Handle(st.step(uint32(1+q), s))
		}
	}
	m.Advance(st.boot + uint64(time.Hour))
	st.boot += uint64(time.Hour)
}

// TestNoGrowthAfterChurn is the churn benchmark's promise as a test.
func TestNoGrowthAfterChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("memory test")
	}
	const n = 20_000
	st := newStream(time.Microsecond)
	m, err := apm.New(apm.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	churn(m, st, n)
	churn(m, st, n)
	base := heapAlloc()
	for range 8 {
		churn(m, st, n)
	}
	end := heapAlloc()
	runtime.KeepAlive(st)
	if end > base+512<<10 {
		t.Errorf("heap grew from %d to %d bytes over 8 rounds of %d QPs", base, end, n)
	}
	if s := m.Stats(); s.QPs != 0 || s.Pending != 0 {
		t.Errorf("left behind: %+v", s)
	}
}

// BenchmarkModelEventsReordered is BenchmarkModelEvents with every pair of
// events arriving swapped, as from two CPUs: the reorder stage puts each
// back.
func BenchmarkModelEventsReordered(b *testing.B) {
	const qps = 4096
	st, m, found := benchModel(b)
	for i := 0; i+1 < b.N; i += 2 {
		e1 := st.step(uint32(1000+i%qps), (i/qps)%8)
		e2 := st.step(uint32(1000+(i+1)%qps), ((i+1)/qps)%8)
		m.Handle(e2)
		m.Handle(e1)
	}
	m.Finish(m.Now())
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if *found != 0 || m.Stats().Late != 0 {
		b.Fatalf("%d findings, %d late from a healthy stream", *found, m.Stats().Late)
	}
}
