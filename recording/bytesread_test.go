package recording

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BytesRead grows with the replay, whatever the files' times, and ends at
// the bytes of every file: rotated segments, plain and compressed.
func TestBytesReadMeasuresTheFiles(t *testing.T) {
	for name, opts := range modes() {
		t.Run(name, func(t *testing.T) {
			prefix := filepath.Join(t.TempDir(), "rec")
			opts.MaxBytes, opts.FlushInterval = 8<<10, -1
			w, err := Create(prefix, testMeta(), opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range realisticEvents(5, 2000) {
				if err := w.Write(e); err != nil {
					t.Fatal(err)
				}
				if i%100 == 99 {
					w.Flush()
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var total int64
			old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
			for _, f := range w.Files() {
				fi, err := os.Stat(f)
				if err != nil {
					t.Fatal(err)
				}
				total += fi.Size()
				if err := os.Chtimes(f, old, old); err != nil { // a copy without its times
					t.Fatal(err)
				}
			}
			r, err := Open(w.Files()...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.BytesRead() != 0 {
				t.Fatalf("read %d bytes before the first event", r.BytesRead())
			}
			var last int64
			grew := 0
			for {
				_, err := r.Next(context.Background())
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				n := r.BytesRead()
				if n < last || n > total {
					t.Fatalf("read %d bytes after %d, of %d", n, last, total)
				}
				if n > last {
					grew++
				}
				last = n
			}
			if r.BytesRead() != total || grew < 3 {
				t.Errorf("read %d bytes of %d at the end, in %d steps", r.BytesRead(), total, grew)
			}
		})
	}
}
