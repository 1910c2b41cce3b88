package fleet

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/natsserver"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkStreamSubjects publishes one record for each of 200,000 ends
// (one subject each) to an embedded JetStream and reports what sizing
// rests on: stored bytes per record, the process's heap per subject
// (server and client in one process) and the publish rate.
func BenchmarkStreamSubjects(b *testing.B) {
	const ends = 200_000
	for b.Loop() {
		srv, err := natsserver.StartEmbedded("127.0.0.1:0", b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		nc, err := nats.Connect(srv.URL())
		if err != nil {
			b.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		ctx := context.Background()
		if err := natsconn.EnsureStreams(ctx, js, natsconn.DefaultLimits); err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		var c wire.Conn
		var futs []jetstream.PubAckFuture
		for i := range ends / 2 {
			for side := range 2 {
				synth(&c, i, side, fleettest.T0)
				c.Episode = wire.Episode{N: 1, Migrations: []time.Time{fleettest.T0}, Rearm: fleettest.T0}
				data, _ := json.Marshal(&c)
				f, err := js.PublishAsync(wire.ConnSubject(&c), data)
				if err != nil {
					b.Fatal(err)
				}
				futs = append(futs, f)
			}
			if len(futs) >= 4000 {
				for _, f := range futs {
					select {
					case <-f.Ok():
					case err := <-f.Err():
						b.Fatal(err)
					}
				}
				futs = futs[:0]
			}
		}
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		s, _ := js.Stream(ctx, wire.ConnStream)
		info, _ := s.Info(ctx, jetstream.WithSubjectFilter(""))
		b.ReportMetric(float64(info.State.Bytes)/float64(info.State.Msgs), "stored-B/record")
		b.ReportMetric(float64(info.State.NumSubjects), "subjects")
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(ends), "heap-B/subject")
		b.ReportMetric(float64(ends)/elapsed.Seconds(), "published/s")
		nc.Close()
		srv.Shutdown()
	}
}
