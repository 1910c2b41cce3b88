package postmortem

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/recording"
	"github.com/apmwatch/apmwatch/recording/recordingtest"
)

// writeBig writes a synthetic recording of about mb megabytes: 3 devices,
// 200 QPs that migrate, load a new alternate and rearm over and over, with
// LAPs and routine modifies in between. It returns the event count.
func writeBig(tb testing.TB, path string, mb int) uint64 {
	b := newHost(0)
	meta := event.Meta{Host: "big", Kernel: "6.12", BootOffset: time.Duration(b.Start.UnixNano()), Version: "bench"}
	w, err := recording.Create(path, meta, recording.Options{FlushInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	devs := []string{"mlx5_0", "mlx5_1", "mlx4_0"}
	const qps = 200
	for i := uint32(0); i < qps; i++ {
		b.Device = devs[i%3]
		connect(b, 100+i, 1000+i, 0x11)
	}
	var n uint64
	flush := func() {
		for _, s := range b.Steps {
			if err := w.Write(s.Ev); err != nil {
				tb.Fatal(err)
			}
			n++
		}
		b.Steps = b.Steps[:0]
	}
	flush()
	for round := 0; ; round++ {
		for i := uint32(0); i < qps; i++ {
			b.Device = devs[i%3]
			q := 100 + i
			b.After(100 * time.Microsecond)
			switch round % 4 {
			case 0:
				b.PathMig(q)
				cmMAD(b, event.MADSend, event.CMAttrLAP, uint64(round)<<16|uint64(i), 0x1000+i, 0x2000+i)
				b.LoadAlt(q, event.Path{Port: 1 + uint32(round/4%2), DLID: uint16(0x40 + round%16)})
				b.Rearm(q)
			default:
				b.Modify(q, event.AttrTimeout|event.AttrRetryCnt, nil)
				b.Modify(q, event.AttrMinRNRTimer, nil)
			}
		}
		flush()
		if round%64 == 0 {
			if fi, err := os.Stat(path); err == nil && fi.Size() >= int64(mb)<<20 {
				break
			}
			if err := w.Flush(); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := w.WriteStats(event.Stats{Events: n}); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	mt := b.Start.Add(time.Duration(b.Now()))
	os.Chtimes(path, mt, mt)
	return n
}

func BenchmarkReplay(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.rec")
	events := writeBig(b, path, 16)
	fi, _ := os.Stat(path)
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Run(context.Background(), []string{path}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if r.Summary.Events != events {
			b.Fatalf("%d events replayed, want %d", r.Summary.Events, events)
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// TestBigReplay replays a large recording (written first when missing):
// APMWATCH_BIG=/path/file [APMWATCH_BIG_MB=1024] [APMWATCH_BIG_ENTRIES=2000]. Run it in a process of
// its own under /usr/bin/time for the peak memory (docs/performance.md).
func TestBigReplay(t *testing.T) {
	path := os.Getenv("APMWATCH_BIG")
	if path == "" {
		t.Skip("set APMWATCH_BIG=/path/to/file")
	}
	if _, err := os.Stat(path); err != nil {
		mb, _ := strconv.Atoi(os.Getenv("APMWATCH_BIG_MB"))
		if mb == 0 {
			mb = 1024
		}
		start := time.Now()
		n := writeBig(t, path, mb)
		t.Logf("wrote %d events in %v", n, time.Since(start))
		return
	}
	fi, _ := os.Stat(path)
	entries, _ := strconv.Atoi(os.Getenv("APMWATCH_BIG_ENTRIES"))
	start := time.Now()
	r, err := Run(context.Background(), []string{path}, Options{MaxEntries: entries})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("replayed %d events, %d MB in %v: %.2f M events/s, %.0f MB/s; %d findings, heap %d MiB, sys %d MiB",
		r.Summary.Events, fi.Size()>>20, el, float64(r.Summary.Events)/el.Seconds()/1e6,
		float64(fi.Size())/1e6/el.Seconds(), len(r.Findings), ms.HeapAlloc>>20, ms.Sys>>20)
	fmt.Fprintln(os.Stderr, r.Summary.Findings)
}

var _ = apmtest.PathA

// BenchmarkHostile replays each crafted recording (recording/recordingtest) of
// 16 MB through the whole postmortem and its JSON report: the time and the
// bytes allocated per file (docs/performance.md, "Hostile recordings").
func BenchmarkHostile(b *testing.B) {
	dir := b.TempDir()
	for _, f := range recordingtest.Files(16e6) {
		path := filepath.Join(dir, f.Name+".rec")
		if err := os.WriteFile(path, f.Data, 0o600); err != nil {
			b.Fatal(err)
		}
		b.Run(f.Name, func(b *testing.B) {
			b.SetBytes(int64(len(f.Data)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r, err := Run(context.Background(), []string{path}, Options{})
				if err != nil {
					continue // refused: the error is the bound
				}
				if err := WriteJSON(io.Discard, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWriteHTML writes the page of a replayed synthetic recording (200
// QPs, each with its full timeline of 2000 entries) and reports the page's
// size per timeline event.
func BenchmarkWriteHTML(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.rec")
	writeBig(b, path, 8)
	r, err := Run(context.Background(), []string{path}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	var entries int
	for _, q := range r.QPs {
		entries += len(q.Entries)
	}
	var size int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var w countWriter
		if err := WriteHTML(&w, r); err != nil {
			b.Fatal(err)
		}
		size = int(w)
	}
	b.ReportMetric(float64(entries), "events")
	b.ReportMetric(float64(size)/float64(entries), "page-bytes/event")
	b.ReportMetric(float64(entries)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

type countWriter int

func (w *countWriter) Write(p []byte) (int, error) { *w += countWriter(len(p)); return len(p), nil }
