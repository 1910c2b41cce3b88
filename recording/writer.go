package recording

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/outfile"
	"github.com/klauspost/compress/zstd"
)

// Options tune a Writer. The zero value writes uncompressed frames, one per
// record, and flushes them to the file at least every second.
type Options struct {
	// Compress groups records into blocks of about BlockSize bytes and
	// compresses each block with zstd. A block is the unit of crash safety:
	// a cut inside a block loses that block.
	Compress bool
	// BlockSize is the uncompressed size at which a block is closed
	// (default 256 KiB, at most 4 MiB). Used with Compress.
	BlockSize int
	// FlushInterval is how often a background goroutine flushes buffered
	// records to the file (ending the open block): at most this much of a
	// recording is lost on kill -9. Zero means one second; negative means
	// never, the caller calls Flush.
	FlushInterval time.Duration
	// Sync makes every timed flush an fsync too (see Writer.Sync), so that
	// at most FlushInterval is lost on power loss.
	Sync bool

	// Rotation, for Create only: when a file reaches MaxBytes or MaxAge it
	// is closed (with its end record) and the recording goes on in a new
	// file. Files are named PATH.000000, PATH.000001, ... and share a
	// session in their headers, so Open reads them back as one stream.
	// With MaxFiles > 0, only the newest MaxFiles files are kept (a flight
	// recorder of the last MaxFiles*MaxBytes bytes or MaxFiles*MaxAge).
	MaxBytes int64
	MaxAge   time.Duration
	MaxFiles int
}

func (o *Options) rotates() bool { return o.MaxBytes > 0 || o.MaxAge > 0 }

const (
	defaultBlockSize     = 256 << 10
	maxBlockSize         = 4 << 20
	defaultFlushInterval = time.Second
	writeBuffer          = 64 << 10 // bytes of whole frames kept before a write
)

// Writer appends events and stats to a recording. Its methods are safe for
// concurrent use, so a ticker may call Flush or Sync while another goroutine
// writes. Errors writing the file are sticky: once one happened, every later
// call returns it.
type Writer struct {
	mu    sync.Mutex
	out   io.Writer
	file  *os.File // when out is a file, for Sync
	owned bool     // Close closes file
	name  string
	hdr   Header
	off   int64 // boot-to-wall offset in nanoseconds
	opts  Options

	buf   []byte // whole frames not yet written
	block []byte // records of the open compressed block
	zenc  *zstd.Encoder
	count endRecord
	err   error
	done  bool
	size  int64 // bytes written to the current file

	prefix   string // rotation: path prefix of the files
	rotating bool
	files    []string // rotation: files kept, oldest first

	stop     chan struct{}
	stopOnce sync.Once
	stopped  chan struct{}
}

// Create creates (or truncates) the file at path and writes the header.
// With rotation (Options.MaxBytes, MaxAge) path is the prefix of the files.
func Create(path string, meta event.Meta, opts Options) (*Writer, error) {
	if opts.MaxFiles < 0 || (opts.MaxFiles > 0 && !opts.rotates()) {
		return nil, errors.New("recording options: MaxFiles needs MaxBytes or MaxAge")
	}
	name := path
	if opts.rotates() {
		name = segmentPath(path, 0)
	}
	f, err := outfile.Create(name, os.O_TRUNC)
	if err != nil {
		return nil, fmt.Errorf("creating recording: %w", err)
	}
	w, err := newWriter(f, name, meta, opts, newSession(), 0)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.owned = true
	if opts.rotates() {
		w.prefix = path
		w.files = []string{name}
	}
	w.startFlusher()
	return w, nil
}

// NewWriter writes a recording to out (a pipe, a socket, a buffer). Close
// flushes but does not close out. Sync calls out.Sync when out is an
// *os.File.
func NewWriter(out io.Writer, meta event.Meta, opts Options) (*Writer, error) {
	if opts.rotates() || opts.MaxFiles != 0 {
		return nil, errors.New("rotation needs files: use Create")
	}
	w, err := newWriter(out, "", meta, opts, newSession(), 0)
	if err != nil {
		return nil, err
	}
	w.startFlusher()
	return w, nil
}

func newSession() uint64 {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather)
	return binary.LittleEndian.Uint64(b[:])
}

func newWriter(out io.Writer, name string, meta event.Meta, opts Options, session uint64, segment uint32) (*Writer, error) {
	if opts.BlockSize <= 0 {
		opts.BlockSize = defaultBlockSize
	}
	if opts.BlockSize > maxBlockSize {
		return nil, fmt.Errorf("block size %d above the maximum of %d", opts.BlockSize, maxBlockSize)
	}
	if opts.FlushInterval == 0 {
		opts.FlushInterval = defaultFlushInterval
	}
	w := &Writer{
		out:  out,
		name: name,
		off:  int64(meta.BootOffset),
		opts: opts,
		hdr: Header{
			Version: FormatVersion,
			Compat:  compatVersion,
			Session: session,
			Segment: segment,
			Created: time.Now(),
			Meta:    meta,
		},
	}
	w.file, _ = out.(*os.File)
	if opts.Compress {
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderCRC(false), // the frame has a checksum
			zstd.WithWindowSize(1<<22), // a block is at most 4 MiB
			zstd.WithLowerEncoderMem(true))
		if err != nil {
			return nil, fmt.Errorf("creating zstd encoder: %w", err)
		}
		w.zenc = enc
		w.block = make([]byte, 0, opts.BlockSize+4<<10)
	}
	w.buf = make([]byte, 0, writeBuffer+4<<10)
	if err := w.writeHeader(); err != nil {
		return nil, err
	}
	return w, nil
}

// startFlusher starts the timed flushes, once the writer is set up.
func (w *Writer) startFlusher() {
	if w.opts.FlushInterval > 0 {
		w.stop, w.stopped = make(chan struct{}), make(chan struct{})
		go w.flusher()
	}
}

func (w *Writer) writeHeader() error {
	start := len(w.buf)
	w.buf = beginFrame(w.buf, frameHeader)
	w.buf = appendHeader(w.buf, &w.hdr)
	if len(w.buf)-start-frameHeaderLen > maxRecord {
		w.buf = w.buf[:start]
		return errors.New("recording header too large")
	}
	finishFrame(w.buf, start)
	return w.writeOut()
}

// Header returns the header written at the start of the current file.
func (w *Writer) Header() Header { return w.hdr }

func (w *Writer) flusher() {
	defer close(w.stopped)
	t := time.NewTicker(w.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			if w.opts.Sync {
				w.Sync()
			} else {
				w.Flush()
			}
		}
	}
}

// Write appends one event.
func (w *Writer) Write(e *event.Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if err := checkStrings(e); err != nil {
		return fmt.Errorf("writing event %d: %w", e.Seq, err)
	}
	if err := w.appendRecord(record{ev: e}); err != nil {
		return fmt.Errorf("writing event %d: %w", e.Seq, err)
	}
	return nil
}

// checkStrings refuses an event a reader would refuse: a string longer
// than maxString.
func checkStrings(e *event.Event) error {
	n := max(len(e.Comm), len(e.Device))
	if e.Modify != nil {
		n = max(n, len(e.Modify.Hook))
	}
	if e.QP != nil {
		n = max(n, len(e.QP.Hook))
	}
	if e.Truth != nil {
		n = max(n, len(e.Truth.Source))
	}
	if n > maxString {
		return fmt.Errorf("string of %d bytes, more than %d", n, maxString)
	}
	return nil
}

// WriteStats appends a snapshot of the recorded source's counters, so that a
// replay reports the events the source lost. Write one whenever the counters
// change and once before Close.
func (w *Writer) WriteStats(s event.Stats) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.appendRecord(record{stats: &s}); err != nil {
		return fmt.Errorf("writing stats: %w", err)
	}
	return nil
}

func (w *Writer) usable() error {
	if w.done {
		return errors.New("recording writer is closed")
	}
	return w.err
}

// record is one record to append: an event, a stats snapshot or the end.
type record struct {
	ev    *event.Event
	stats *event.Stats
	end   bool
}

func (w *Writer) encode(b []byte, r record) []byte {
	switch {
	case r.ev != nil:
		return appendEvent(b, r.ev, w.off)
	case r.stats != nil:
		return appendStats(b, r.stats)
	default:
		return appendEnd(b, w.count)
	}
}

// appendRecord adds one record: as its own frame, or to the open block.
func (w *Writer) appendRecord(r record) error {
	if w.zenc != nil {
		start := len(w.block)
		w.block = w.encode(w.block, r)
		if n := len(w.block) - start; n > maxRecord {
			w.block = w.block[:start]
			return fmt.Errorf("record of %d bytes above the maximum of %d", n, maxRecord)
		}
		if len(w.block) >= w.opts.BlockSize {
			w.endBlock()
		}
	} else {
		start := len(w.buf)
		w.buf = beginFrame(w.buf, frameRecords)
		w.buf = w.encode(w.buf, r)
		if n := len(w.buf) - start - frameHeaderLen; n > maxRecord {
			w.buf = w.buf[:start]
			return fmt.Errorf("record of %d bytes above the maximum of %d", n, maxRecord)
		}
		finishFrame(w.buf, start)
	}
	switch { // counted before a write that may rotate
	case r.ev != nil:
		w.count.events++
	case r.stats != nil:
		w.count.stats++
	}
	if len(w.buf) >= writeBuffer {
		return w.writeOut()
	}
	return nil
}

// endBlock compresses the open block into a frame (kept uncompressed when
// zstd does not make it smaller).
func (w *Writer) endBlock() {
	if len(w.block) == 0 {
		return
	}
	start := len(w.buf)
	w.buf = beginFrame(w.buf, frameZstd)
	w.buf = w.zenc.EncodeAll(w.block, w.buf)
	if len(w.buf)-start-frameHeaderLen >= len(w.block) {
		w.buf = beginFrame(w.buf[:start], frameRecords)
		w.buf = append(w.buf, w.block...)
	}
	finishFrame(w.buf, start)
	w.block = w.block[:0]
}

func (w *Writer) writeOut() error {
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.out.Write(w.buf)
	w.size += int64(n)
	w.buf = w.buf[:0]
	if err != nil {
		w.err = fmt.Errorf("writing recording %s: %w", w.name, err)
		return w.err
	}
	if w.prefix != "" && !w.done && !w.rotating && (w.opts.MaxBytes > 0 && w.size >= w.opts.MaxBytes ||
		w.opts.MaxAge > 0 && time.Since(w.hdr.Created) >= w.opts.MaxAge) {
		return w.rotate()
	}
	return nil
}

// Flush writes every record written so far to the file (ending the open
// compressed block). After Flush returns, a kill -9 of this process loses
// nothing already written.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	return w.flush()
}

func (w *Writer) flush() error {
	if w.zenc != nil {
		w.endBlock()
	}
	return w.writeOut()
}

// Sync flushes and then fsyncs the file, so what was written survives a
// power loss. It is a flush only when the output is not a file.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	return w.sync()
}

func (w *Writer) sync() error {
	if err := w.flush(); err != nil {
		return err
	}
	if w.file != nil {
		if err := w.file.Sync(); err != nil {
			w.err = fmt.Errorf("syncing recording %s: %w", w.name, err)
			return w.err
		}
	}
	return nil
}

// Close ends the recording with an end record (which tells a reader the file
// was not cut), syncs it and closes the file if Create opened it.
func (w *Writer) Close() error {
	if w.stop != nil {
		w.stopOnce.Do(func() { close(w.stop) })
		<-w.stopped
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return errors.New("recording writer is closed")
	}
	w.done = true
	err := w.err
	if err == nil {
		err = w.appendRecord(record{end: true})
	}
	if err == nil {
		err = w.sync()
	}
	if w.zenc != nil {
		w.zenc.Close()
	}
	if w.owned {
		if cerr := w.file.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing recording %s: %w", w.name, cerr)
		}
	}
	return err
}
