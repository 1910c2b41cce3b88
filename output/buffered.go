package output

import (
	"bufio"
	"io"
)

// bufferSize is how much output a Buffered writer holds: a storm costs one
// write(2) per this many bytes instead of one per line.
const bufferSize = 64 << 10

// Buffered is a Writer whose output goes through one buffer. Bytes leave
// it when the buffer fills, on Flush and on Close; when to flush otherwise
// is the caller's (trace flushes once the stream goes idle).
type Buffered struct {
	Writer
	buf *bufio.Writer
}

// NewBuffered returns the renderer for an --output value, buffered.
func NewBuffered(format string, w io.Writer) (*Buffered, error) {
	buf := bufio.NewWriterSize(w, bufferSize)
	inner, err := NewWriter(format, wholeWrites{buf})
	if err != nil {
		return nil, err
	}
	return &Buffered{Writer: inner, buf: buf}, nil
}

// SetHost names the host the findings are from, where the format writes
// it (JSON).
func (b *Buffered) SetHost(host string) {
	if j, ok := b.Writer.(*JSONWriter); ok {
		j.SetHost(host)
	}
}

// Pending says whether output waits in the buffer.
func (b *Buffered) Pending() bool { return b.buf.Buffered() > 0 }

// Flush writes what the buffer holds.
func (b *Buffered) Flush() error { return b.buf.Flush() }

// Close ends the output and flushes it.
func (b *Buffered) Close() error {
	err := b.Writer.Close()
	if ferr := b.buf.Flush(); err == nil {
		err = ferr
	}
	return err
}

// wholeWrites flushes before a write that does not fit, so that what the
// renderers write in one call (a JSON line, a table line) leaves in one
// write(2) with what came before it, never split across two.
type wholeWrites struct{ b *bufio.Writer }

func (w wholeWrites) Write(p []byte) (int, error) {
	if len(p) > w.b.Available() && w.b.Buffered() > 0 {
		if err := w.b.Flush(); err != nil {
			return 0, err
		}
	}
	return w.b.Write(p)
}
