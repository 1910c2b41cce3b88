package fleet

import (
	"encoding/json"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// synth writes the record of one end of connection i into c: 1000 hosts
// with one GID each, LID-routed pairs in subnet fe80::, QPNs from i.
func synth(c *wire.Conn, i int, side int, at time.Time) {
	ha, hb := i%1000, (i/1000+i+1)%1000
	if ha == hb {
		hb = (hb + 1) % 1000
	}
	qa, qb := uint32(0x100+i), uint32(0x100+i+1<<22)
	la, lb := uint16(ha+1), uint16(hb+1)
	if side == 1 {
		ha, hb, qa, qb, la, lb = hb, ha, qb, qa, lb, la
	}
	*c = wire.Conn{Host: hostNames[ha], Device: "mlx5_0", Port: 1, Type: "RC", Local: wire.Addr{GID: gids[ha], LID: la, QPN: qa},
		Remote: wire.Addr{LID: lb, QPN: qb}, APM: true, Armed: true, Mig: "ARMED", MigRead: at, Changed: at, At: at, Rev: uint64(at.UnixNano())}
}

var hostNames, gids = func() ([]string, []string) {
	var h, g []string
	for i := range 1000 {
		h = append(h, fmt.Sprintf("node%04d", i))
		g = append(g, fmt.Sprintf("fe80::%x", i+1))
	}
	return h, g
}()

// fillEngine applies both ends of n connections.
func fillEngine(g *Engine, n int, at time.Time) {
	var c wire.Conn
	for i := range n {
		for side := range 2 {
			synth(&c, i, side, at)
			g.Apply(&c, at)
		}
	}
}

// BenchmarkEngineMemory1M tracks one million connections (two million
// ends) and reports the heap they hold.
func BenchmarkEngineMemory1M(b *testing.B) {
	const n = 1_000_000
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, func(Line) {})
		fillEngine(g, n, fleettest.T0)
		runtime.GC()
		runtime.ReadMemStats(&after)
		if st := g.Stats(); st.ByState[StateArmed] != n || st.Unpaired != 0 {
			b.Fatalf("stats: %+v", st)
		}
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/(1<<20), "MiB/1M-conns")
		runtime.KeepAlive(g)
	}
}

// BenchmarkEngineApply applies records to an engine holding one million
// connections: each record is a new revision of one end that migrates,
// then rearms (half the pairs become one-sided, then armed again).
func BenchmarkEngineApply(b *testing.B) {
	const n = 1_000_000
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, func(Line) {})
	fillEngine(g, n, fleettest.T0)
	recs := make([]wire.Conn, 4096)
	for i := range recs {
		synth(&recs[i], i*241%n, i%2, fleettest.T0)
	}
	at := fleettest.T0
	b.ResetTimer()
	i := 0
	cpu0 := cpuTime()
	for b.Loop() {
		c := &recs[i%len(recs)]
		at = at.Add(time.Microsecond)
		c.At, c.Rev = at, c.Rev+1
		if c.Armed {
			c.Armed, c.Changed, c.Episode = false, at, wire.Episode{N: c.Episode.N + 1, Migrations: c.Episode.Migrations[:0]}
		} else {
			c.Armed, c.Changed = true, at
		}
		g.Apply(c, at)
		if i%1024 == 0 {
			g.Advance(at)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(b.N)/(cpuTime()-cpu0).Seconds(), "records/cpu-s")
}

// cpuTime is the process's CPU time (user and system): on a shared machine
// wall-clock rates depend on the neighbours, CPU rates much less.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRecordDecode is the other per-record cost of an instance: the
// JSON of one record, by the decoder the engine uses (decodeJSON) and by
// encoding/json, side by side.
func BenchmarkRecordDecode(b *testing.B) {
	var c wire.Conn
	synth(&c, 12345, 0, fleettest.T0)
	c.Episode = wire.Episode{N: 2, Migrations: []time.Time{fleettest.T0}, Rearm: fleettest.T0}
	data, _ := json.Marshal(&c)
	for _, d := range []struct {
		name   string
		decode func([]byte, any) error
	}{{"engine", decodeJSON}, {"encoding-json", json.Unmarshal}} {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			cpu0 := cpuTime()
			for b.Loop() {
				var x wire.Conn
				if err := d.decode(data, &x); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(b.N)/(cpuTime()-cpu0).Seconds(), "records/cpu-s")
		})
	}
}
