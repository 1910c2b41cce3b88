package output

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/apmwatch/apmwatch/internal/testkit"
)

// writes keeps every call made to it apart.
type writes struct{ calls [][]byte }

func (w *writes) Write(p []byte) (int, error) {
	w.calls = append(w.calls, bytes.Clone(p))
	return len(p), nil
}

// A buffered writer gives the bytes of the unbuffered one, in fewer
// writes, each of whole lines: nothing before Flush or a full buffer, the
// rest on Close.
func TestBufferedSameBytesWholeLines(t *testing.T) {
	for _, format := range []string{"json", "table", "wide"} {
		var plain bytes.Buffer
		var buffered writes
		pw, err := NewWriter(format, &plain)
		if err != nil {
			t.Fatal(err)
		}
		bw, err := NewBuffered(format, &buffered)
		if err != nil {
			t.Fatal(err)
		}
		es := sample()
		if err := bw.Write(es[0]); err != nil {
			t.Fatal(err)
		}
		if len(buffered.calls) != 0 || !bw.Pending() {
			t.Fatalf("-o %s: %d writes before a flush, pending %v", format, len(buffered.calls), bw.Pending())
		}
		if err := bw.Flush(); err != nil || len(buffered.calls) != 1 || bw.Pending() {
			t.Fatalf("-o %s: flush: %v, %d writes, pending %v", format, err, len(buffered.calls), bw.Pending())
		}
		if err := pw.Write(es[0]); err != nil {
			t.Fatal(err)
		}
		n := 2000 // well over the buffer
		for i := range n {
			for _, w := range []Writer{pw, bw} {
				if err := w.Write(es[i%len(es)]); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, w := range []Writer{pw, bw} {
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if got := bytes.Join(buffered.calls, nil); !bytes.Equal(got, plain.Bytes()) {
			t.Fatalf("-o %s: buffered output differs from unbuffered (%d, %d bytes)", format, len(got), plain.Len())
		}
		if len(buffered.calls) < 3 || len(buffered.calls) > n/10 {
			t.Errorf("-o %s: %d writes for %d lines", format, len(buffered.calls), n)
		}
		for i, c := range buffered.calls {
			if len(c) > bufferSize || c[len(c)-1] != '\n' {
				t.Fatalf("-o %s: write %d of %d bytes does not end a line", format, i, len(c))
			}
		}
	}
}

type failing struct{ err error }

func (f failing) Write([]byte) (int, error) { return 0, f.err }

// An error of the underlying writer comes back from Flush and Close.
func TestBufferedReportsWriteError(t *testing.T) {
	broken := errors.New("broken pipe")
	for _, format := range []string{"json", "table", "wide"} {
		w, err := NewBuffered(format, failing{broken})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(sample()[0]); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); !errors.Is(err, broken) {
			t.Errorf("-o %s: flush: %v", format, err)
		}
		if err := w.Close(); !errors.Is(err, broken) {
			t.Errorf("-o %s: close: %v", format, err)
		}
	}
}

// BenchmarkTraceWriter: the events of every kind through trace's writer
// to /dev/null, one write(2) per line (unbuffered) and through the buffer
// (buffered), side by side in one run.
func BenchmarkTraceWriter(b *testing.B) {
	es := sample()
	for _, format := range []string{"json", "table", "wide"} {
		for _, mode := range []string{"unbuffered", "buffered"} {
			b.Run(format+"/"+mode, func(b *testing.B) {
				f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				var w Writer
				if mode == "buffered" {
					w, err = NewBuffered(format, f)
				} else {
					w, err = NewWriter(format, f)
				}
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				cpu := testkit.CPUTime()
				for i := 0; b.Loop(); i++ {
					if err := w.Write(es[i%len(es)]); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				testkit.ReportCPU(b, cpu)
			})
		}
	}
}
