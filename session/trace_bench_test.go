package session

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/testkit"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// stormSource hands out n events as fast as they are taken (a modify and
// a PATH_MIG in turn over 4096 QPs), then io.EOF; it looks at ctx as a
// collector does.
type stormSource struct {
	fakeSource
	n, i int
	es   [2]event.Event
}

func (s *stormSource) Next(ctx context.Context) (*event.Event, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	default:
	}
	if s.i == s.n {
		return nil, io.EOF
	}
	e := &s.es[s.i%2]
	s.i++
	e.Seq, e.Boot, e.QPN = uint64(s.i), uint64(s.i)*1000, uint32(s.i/2%4096+1)
	return e, nil
}

// BenchmarkTrace: RunTrace with -o json to /dev/null over a storm of
// events: with the model, with the model and a (empty) reading every
// second as trace's default --reconcile-interval, and without the model
// (--no-findings); CPU per event.
func BenchmarkTrace(b *testing.B) {
	for _, c := range []struct {
		name       string
		noFindings bool
		reconcile  time.Duration
	}{{"model", false, 0}, {"model+reconcile", false, time.Second}, {"no-findings", true, 0}} {
		b.Run(c.name, func(b *testing.B) {
			f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			src := &stormSource{n: b.N}
			src.es[0] = *newFake(1, 0).live[0]
			src.es[1] = *qpEvent(0, 0, 0, event.EvPathMig)
			var boot uint64
			b.ReportAllocs()
			b.ResetTimer()
			cpu := testkit.CPUTime()
			err = RunTrace(context.Background(), TraceConfig{Output: "json", NoFindings: c.noFindings, Model: apm.DefaultConfig(), Reconcile: c.reconcile},
				TraceDeps{Open: func() (event.Source, error) { return src, nil }, Boot: func() uint64 { boot += 1000; return boot },
					Snapshot: func() (rdmanl.Snapshot, error) { return rdmanl.Snapshot{Boot: boot}, nil }, Stdout: f, Stderr: io.Discard})
			if err != nil {
				b.Fatal(err)
			}
			testkit.ReportCPU(b, cpu)
		})
	}
}
