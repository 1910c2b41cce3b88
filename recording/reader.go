package recording

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"sort"

	"github.com/apmwatch/apmwatch/event"
	"github.com/klauspost/compress/zstd"
)

// ReadOptions tune a Reader.
type ReadOptions struct {
	// OnWarning, when set, is called with every warning as it happens
	// (Reader.Warnings keeps the first thousand).
	OnWarning func(Warning)
	// OnLoss, when set, is called with each stretch of missing records as
	// the replay finds it (Reader.Losses keeps them all).
	OnLoss func(Loss)
}

// Reader replays recordings as an event.Source: Meta comes from the header,
// Next returns the recorded events in order and then io.EOF, and Stats
// returns the recorded source's counters as of the replay position (plus the
// records the replay could not decode, in DecodeErrs). A Reader is not safe
// for concurrent use.
type Reader struct {
	opts     ReadOptions
	inputs   []*input
	next     int   // index of the next input to start
	cur      *part // the input being read
	meta     event.Meta
	warnings []Warning
	dropped  int // warnings not kept

	zdec  *zstd.Decoder
	block []byte
	in    interner

	session   uint64
	started   bool
	base, now event.Stats // finished sessions, current session
	replayErr uint64      // records this replay could not decode
	closed    bool
	loss      lossTrack
	done      int64 // bytes of the inputs read to their end
}

var _ event.Source = (*Reader)(nil)

// input is one file (or stream) of a replay and its header.
type input struct {
	name string
	hdr  *Header
	open func() (io.ReadCloser, *scanner, error) // a scanner positioned after the header
}

// Open replays the recordings at paths, which must come from one host: the
// rotated segments of a recording, or several recordings of one host. They
// are read in the order of their headers (session start, then segment), not
// of the arguments. A file with an unreadable header is an error, except a
// file empty or cut inside its header (a writer killed at once), which is
// skipped with a warning when other files remain.
func Open(paths ...string) (*Reader, error) {
	return OpenWith(ReadOptions{}, paths...)
}

// OpenWith is Open with options.
func OpenWith(opts ReadOptions, paths ...string) (*Reader, error) {
	if len(paths) == 0 {
		return nil, errors.New("no recording to open")
	}
	r := &Reader{opts: opts, loss: lossTrack{on: opts.OnLoss}}
	var firstErr error
	for _, p := range paths {
		h, err := readFileHeader(p)
		if errors.Is(err, errNoHeader) {
			r.warn(p, 0, err.Error()+": file skipped")
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", p, err)
			}
			continue
		}
		var pe *fs.PathError
		if errors.As(err, &pe) { // names the file already
			return nil, fmt.Errorf("opening recording: %w", err)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		r.inputs = append(r.inputs, &input{name: p, hdr: h, open: openAfterHeader(p)})
	}
	if len(r.inputs) == 0 {
		return nil, firstErr
	}
	if err := r.order(); err != nil {
		return nil, err
	}
	return r, nil
}

// NewReader replays one recording read from rd (standard input, a pipe).
// The name is used in warnings and errors.
func NewReader(rd io.Reader, name string, opts ReadOptions) (*Reader, error) {
	r := &Reader{opts: opts, loss: lossTrack{on: opts.OnLoss}}
	sc := newScanner(rd, nil)
	h, err := readHeader(sc)
	if err != nil {
		if name != "" {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return nil, err
	}
	used := false
	r.inputs = []*input{{name: name, hdr: h, open: func() (io.ReadCloser, *scanner, error) {
		if used {
			return nil, nil, errors.New("stream already read")
		}
		used = true
		return io.NopCloser(nil), sc, nil
	}}}
	r.meta = h.Meta
	return r, nil
}

var errNoHeader = errors.New("no header")

// readHeader reads the header frame that must start the input.
func readHeader(sc *scanner) (*Header, error) {
	typ, n, why, short := sc.check()
	switch {
	case short && sc.end == sc.pos:
		return nil, fmt.Errorf("%w: empty file", errNoHeader)
	case short:
		return nil, fmt.Errorf("%w: file cut inside the header at offset %d", errNoHeader, sc.end-sc.pos)
	case why == "no frame magic":
		return nil, errors.New("not an apmwatch recording")
	case n == 0:
		return nil, fmt.Errorf("damaged header (%s)", why)
	case typ != frameHeader:
		return nil, errors.New("not an apmwatch recording: no header frame")
	}
	h, err := decodeHeader(sc.buf[sc.pos+frameHeaderLen : sc.pos+n])
	if err != nil {
		return nil, err
	}
	sc.pos += n
	return h, nil
}

var errDirectory = errors.New("is a directory, not a recording: give the files in it")

func readFileHeader(path string) (*Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, errDirectory
	}
	return readHeader(newScanner(f, nil))
}

func openAfterHeader(path string) func() (io.ReadCloser, *scanner, error) {
	return func() (io.ReadCloser, *scanner, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, err
		}
		sc := newScanner(f, nil)
		if _, err := readHeader(sc); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		return f, sc, nil
	}
}

// order sorts the inputs by session (earliest first) and segment, and checks
// that they come from one host.
func (r *Reader) order() error {
	start := make(map[uint64]int64) // session -> earliest creation
	for _, in := range r.inputs {
		c := in.hdr.Created.UnixNano()
		if s, ok := start[in.hdr.Session]; !ok || c < s {
			start[in.hdr.Session] = c
		}
	}
	sort.SliceStable(r.inputs, func(i, j int) bool {
		a, b := r.inputs[i].hdr, r.inputs[j].hdr
		if a.Session != b.Session {
			if start[a.Session] != start[b.Session] {
				return start[a.Session] < start[b.Session]
			}
			return a.Session < b.Session
		}
		return a.Segment < b.Segment
	})
	first := r.inputs[0]
	r.meta = first.hdr.Meta
	for i, in := range r.inputs[1:] {
		prev := r.inputs[i]
		h := in.hdr
		if h.Meta.Host != first.hdr.Meta.Host {
			return fmt.Errorf("recordings of different hosts (%s: %q, %s: %q): replay each host on its own",
				first.name, first.hdr.Meta.Host, in.name, h.Meta.Host)
		}
		switch {
		case h.Session == prev.hdr.Session && h.Segment == prev.hdr.Segment:
			return fmt.Errorf("%s and %s are the same segment %d of one recording", prev.name, in.name, h.Segment)
		case h.Session == prev.hdr.Session && h.Segment != prev.hdr.Segment+1:
			r.warn(in.name, 0, fmt.Sprintf("segments %d to %d of this recording are missing", prev.hdr.Segment+1, h.Segment-1))
		case h.Session != prev.hdr.Session && !reflect.DeepEqual(h.Meta, prev.hdr.Meta):
			r.warn(in.name, 0, "recorded by another apmwatch run with a different setup (hooks, version or clock offset); Meta is the first file's")
		}
	}
	return nil
}

func (r *Reader) warn(file string, off int64, msg string) {
	w := Warning{File: file, Offset: off, Msg: msg}
	if r.opts.OnWarning != nil {
		r.opts.OnWarning(w)
	}
	if len(r.warnings) < maxWarnings {
		r.warnings = append(r.warnings, w)
	} else {
		r.dropped++
	}
}

// Meta returns the header's description of the recorded source (of the
// first file when there are several).
func (r *Reader) Meta() event.Meta { return r.meta }

// Headers returns the headers of the files in replay order.
func (r *Reader) Headers() []Header {
	out := make([]Header, len(r.inputs))
	for i, in := range r.inputs {
		out[i] = *in.hdr
	}
	return out
}

// Warnings returns the warnings so far (the first thousand).
func (r *Reader) Warnings() []Warning { return r.warnings }

// Stats returns the recorded source's counters as of the replay position:
// the last stats record read, summed over the writer runs (sessions) read so
// far. DecodeErrs also counts the damaged frames and undecodable records of
// the replay itself.
func (r *Reader) Stats() event.Stats {
	s := event.Stats{
		Events:     r.base.Events + r.now.Events,
		Lost:       r.base.Lost + r.now.Lost,
		Missed:     r.base.Missed + r.now.Missed,
		MissedAt:   r.now.MissedAt,
		DecodeErrs: r.base.DecodeErrs + r.now.DecodeErrs + r.replayErr,
		Unjoined:   r.base.Unjoined + r.now.Unjoined,
		At:         r.now.At,
		LostPerCPU: addPerCPU(nil, r.base.LostPerCPU),
	}
	s.LostPerCPU = addPerCPU(s.LostPerCPU, r.now.LostPerCPU)
	return s
}

func addPerCPU(dst, src []uint64) []uint64 {
	for len(dst) < len(src) {
		dst = append(dst, 0)
	}
	for i, v := range src {
		dst[i] += v
	}
	return dst
}

// BytesRead is how far the replay has read: the bytes of the inputs read
// to their end and the position in the one being read (compressed bytes
// for a compressed recording). With the inputs' sizes it measures progress
// whatever the files' times say (a copy's modification time is the copy's).
func (r *Reader) BytesRead() int64 {
	if r.cur != nil {
		return r.done + r.cur.sc.offset()
	}
	return r.done
}

// Close stops the replay and closes the open file.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	var err error
	if r.cur != nil {
		err = r.cur.close()
		r.cur = nil
	}
	if r.zdec != nil {
		r.zdec.Close()
	}
	return err
}

// Next returns the next recorded event, or io.EOF after the last one.
func (r *Reader) Next(ctx context.Context) (*event.Event, error) {
	if r.closed {
		return nil, errors.New("recording reader is closed")
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if r.cur == nil {
			if r.next == len(r.inputs) {
				return nil, io.EOF
			}
			if err := r.start(r.inputs[r.next]); err != nil {
				return nil, err
			}
			r.next++
		}
		typ, body, off, ok := r.cur.record(r)
		if !ok {
			r.cur.finish(r)
			r.done += r.cur.sc.offset()
			err := r.cur.close()
			r.cur = nil
			if err != nil {
				return nil, err
			}
			continue
		}
		switch typ {
		case recEvent:
			e, err := decodeEvent(body, r.cur.bootOff, &r.in)
			if err != nil {
				r.replayErr++
				r.loss.damaged()
				r.warn(r.cur.name, off, fmt.Sprintf("event record does not decode (%v): skipped", err))
				continue
			}
			r.cur.events++
			r.loss.event(e.Boot)
			return e, nil
		case recStats:
			s, err := decodeStats(body)
			if err != nil {
				r.replayErr++
				r.loss.damaged()
				r.warn(r.cur.name, off, fmt.Sprintf("stats record does not decode (%v): skipped", err))
				continue
			}
			r.cur.stats++
			r.now = s
			r.loss.stats(s)
		case recEnd:
			end, err := decodeEnd(body)
			if err != nil {
				r.replayErr++
				r.warn(r.cur.name, off, fmt.Sprintf("end record does not decode (%v): skipped", err))
				continue
			}
			r.cur.end = &end
		default:
			if !r.cur.unknownRec[typ] {
				r.cur.unknownRec[typ] = true
				r.warn(r.cur.name, off, fmt.Sprintf("record of unknown type %d skipped (written by a newer apmwatch?); later ones are skipped silently", typ))
			}
		}
	}
}

// start begins reading an input, folding the stats of a finished session.
func (r *Reader) start(in *input) error {
	if r.started && in.hdr.Session != r.session {
		r.base.Events += r.now.Events
		r.base.Lost += r.now.Lost
		r.base.Missed += r.now.Missed
		r.base.DecodeErrs += r.now.DecodeErrs
		r.base.Unjoined += r.now.Unjoined
		r.base.LostPerCPU = addPerCPU(r.base.LostPerCPU, r.now.LostPerCPU)
		r.now = event.Stats{}
		r.loss.session()
	}
	r.started, r.session = true, in.hdr.Session
	rc, sc, err := in.open()
	if err != nil {
		return fmt.Errorf("opening recording: %w", err)
	}
	name := in.name
	sc.warn = func(off int64, msg string) { r.loss.damaged(); r.warn(name, off, msg) }
	sc.errs = &r.replayErr
	r.cur = &part{
		name:       name,
		hdr:        in.hdr,
		rc:         rc,
		sc:         sc,
		bootOff:    int64(in.hdr.Meta.BootOffset),
		unknownRec: make(map[byte]bool),
		unknownFr:  make(map[byte]bool),
	}
	return nil
}
