package recording

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func benchModes() []struct {
	name string
	opts Options
} {
	return []struct {
		name string
		opts Options
	}{{"plain", Options{FlushInterval: -1}}, {"zstd", Options{Compress: true, FlushInterval: -1}}}
}

// BenchmarkWrite: events/s and MB/s (of file written) for one writer.
func BenchmarkWrite(b *testing.B) {
	evs := realisticEvents(1, 1<<16)
	for _, m := range benchModes() {
		b.Run(m.name, func(b *testing.B) {
			var cw countWriter
			w, err := NewWriter(&cw, testMeta(), m.opts)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := w.Write(evs[i&(len(evs)-1)]); err != nil {
					b.Fatal(err)
				}
			}
			w.Close()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(cw.n)/1e6/b.Elapsed().Seconds(), "MB/s")
			b.ReportMetric(float64(cw.n)/float64(b.N), "B/event")
		})
	}
}

// BenchmarkRead: events/s and MB/s (of file read) for one replay.
func BenchmarkRead(b *testing.B) {
	const n = 1 << 18
	for _, m := range benchModes() {
		b.Run(m.name, func(b *testing.B) {
			var buf bytes.Buffer
			w, _ := NewWriter(&buf, testMeta(), m.opts)
			g := newRealistic(2, testMeta())
			for i := 0; i < n; i++ {
				w.Write(g.next())
			}
			w.Close()
			data := buf.Bytes()
			runtime.GC() // only the file stays live, as in a real replay
			b.ReportAllocs()
			b.ResetTimer()
			read := 0
			for read < b.N {
				r, err := NewReader(bytes.NewReader(data), "", ReadOptions{})
				if err != nil {
					b.Fatal(err)
				}
				for read < b.N {
					if _, err := r.Next(context.Background()); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
					read++
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(b.N)*float64(len(data))/n/1e6/b.Elapsed().Seconds(), "MB/s")
		})
	}
}

// TestBigFile makes and replays a large recording, for docs/performance.md.
// RECORDING_BIG=/tmp/apmwatch-big.rec writes it (RECORDING_BIG_MB, default
// 1024, RECORDING_BIG_ZSTD=1 to compress) unless it exists, then replays it
// and reports time, rates and the process's peak memory. Run the replay in
// a process of its own (the second run) so the peak is the replay's.
func TestBigFile(t *testing.T) {
	path := os.Getenv("RECORDING_BIG")
	if path == "" {
		t.Skip("set RECORDING_BIG=/tmp/file to run")
	}
	if _, err := os.Stat(path); err != nil {
		mb, _ := strconv.Atoi(os.Getenv("RECORDING_BIG_MB"))
		if mb == 0 {
			mb = 1024
		}
		opts := Options{FlushInterval: -1, Compress: os.Getenv("RECORDING_BIG_ZSTD") == "1"}
		w, err := Create(path, testMeta(), opts)
		if err != nil {
			t.Fatal(err)
		}
		g := newRealistic(99, testMeta())
		start := time.Now()
		for {
			if g.seq%(1<<16) == 0 {
				w.Flush()
				w.WriteStats(event.Stats{Events: g.seq, Lost: g.seq / 100000})
				if fi, _ := os.Stat(path); fi.Size() >= int64(mb)<<20 {
					break
				}
			}
			if err := w.Write(g.next()); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(path)
		el := time.Since(start)
		t.Logf("wrote %s: %d events, %.0f MB in %v: %.0f events/s, %.0f MB/s", filepath.Base(path), g.seq,
			float64(fi.Size())/1e6, el.Round(time.Millisecond), float64(g.seq)/el.Seconds(), float64(fi.Size())/1e6/el.Seconds())
		return
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		_, err := r.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	el := time.Since(start)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("replayed %d events, %.0f MB in %v: %.0f events/s, %.0f MB/s; peak RSS %d MiB, Go heap sys %d MiB, warnings %d, lost %d",
		n, float64(fi.Size())/1e6, el.Round(time.Millisecond), float64(n)/el.Seconds(), float64(fi.Size())/1e6/el.Seconds(),
		ru.Maxrss>>10, ms.HeapSys>>20, len(r.Warnings()), r.Stats().Lost)
	if len(r.Warnings()) != 0 {
		t.Errorf("warnings: %v", r.Warnings())
	}
}
