package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/outfile"
	"github.com/apmwatch/apmwatch/recording"
)

// eventWriter is what the recorder needs of a *recording.Writer (a fake in
// tests).
type eventWriter interface {
	Write(*event.Event) error
	WriteStats(event.Stats) error
	Flush() error
	Close() error
	Files() []string
}

// writerFactory creates a rotating recording at prefix (recording.Create).
type writerFactory func(prefix string, meta event.Meta, opts recording.Options) (eventWriter, error)

func createRecording(prefix string, meta event.Meta, opts recording.Options) (eventWriter, error) {
	return recording.Create(prefix, meta, opts)
}

// recorderRetry is how long a failed flight recorder waits before it is
// created again.
const recorderRetry = 30 * time.Second

// flightPrefix starts the name of every flight recorder file.
const flightPrefix = "flight-"

// segments is how many files the recorder's budget is split into: the
// budget is kept to within one file.
const segments = 8

// recorder is the flight recorder: every raw event, in the recording format,
// in rotated files under dir, of which only the last maxAge and maxBytes are
// kept. Any write error drops it (the daemon goes on without it) and it is
// started again after recorderRetry. Each start is a new recording session
// (recording.Open reads several in a row).
type recorder struct {
	dir      string
	maxAge   time.Duration
	maxBytes int64
	create   writerFactory
	m        *metrics
	warn     func(string, ...any)

	w       eventWriter
	meta    event.Meta
	starts  int
	retryAt time.Time
	down    string // why it is not writing ("" when it is)
}

func newRecorder(dir string, maxAge time.Duration, maxBytes int64, create writerFactory, m *metrics, warn func(string, ...any)) (*recorder, error) {
	if err := outfile.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("creating the recorder directory: %w", err)
	}
	return &recorder{dir: dir, maxAge: maxAge, maxBytes: maxBytes, create: create, m: m, warn: warn}, nil
}

// start begins a new recording session with meta (at start-up and after the
// probes are attached again).
func (r *recorder) start(meta event.Meta, now time.Time) {
	r.stop()
	r.meta = meta
	r.starts++
	// the process ID keeps a daemon restarted within the second from
	// truncating its predecessor's files (restore.go reads them)
	prefix := filepath.Join(r.dir, fmt.Sprintf("%s%s-%d-%d", flightPrefix, now.UTC().Format("20060102T150405Z"), os.Getpid(), r.starts))
	opts := recording.Options{Compress: true, MaxBytes: max(r.maxBytes/segments, 1<<16)}
	if r.maxAge > 0 {
		opts.MaxAge = max(r.maxAge/segments, time.Second)
	}
	w, err := r.create(prefix, meta, opts)
	if err != nil {
		r.fail(err, now)
		return
	}
	if r.down != "" {
		r.warn("flight recorder writing again", "dir", r.dir)
	}
	r.w, r.down = w, ""
	r.m.recorderUp.Set(1)
}

// fail drops the recorder after an error and schedules a new start.
func (r *recorder) fail(err error, now time.Time) {
	why := "error"
	if noSpace(err) {
		why = "disk full"
	}
	if r.w != nil {
		r.w.Close() // its error is the one we have
		r.w = nil
	}
	if r.down == "" {
		r.warn("flight recorder dropped: the daemon goes on without it", "why", why, "err", err, "retry_in", recorderRetry)
	}
	r.down, r.retryAt = why, now.Add(recorderRetry)
	r.m.recorderErrors.Inc()
	r.m.recorderUp.Set(0)
}

func (r *recorder) write(e *event.Event, now time.Time) {
	if r.w == nil {
		return
	}
	if err := r.w.Write(e); err != nil {
		r.fail(err, now)
	}
}

func (r *recorder) writeStats(s event.Stats, now time.Time) {
	if r.w == nil {
		return
	}
	if err := r.w.WriteStats(s); err != nil {
		r.fail(err, now)
	}
}

// flush makes everything written so far readable from the files (before a
// bundle reads them).
func (r *recorder) flush(now time.Time) {
	if r.w == nil {
		return
	}
	if err := r.w.Flush(); err != nil {
		r.fail(err, now)
	}
}

// tick retries a dropped recorder and applies the age and byte budget.
func (r *recorder) tick(now time.Time) {
	if r.w == nil && r.down != "" && !now.Before(r.retryAt) {
		r.start(r.meta, now)
	}
	r.prune(now)
}

// free drops the recorder and deletes its files: the finding log needs the
// room more. It reports whether anything was deleted.
func (r *recorder) free(now time.Time) bool {
	if r.w != nil {
		r.w.Close()
		r.w = nil
	}
	freed := false
	for _, f := range r.files() {
		if os.Remove(f.path) == nil {
			freed = true
		}
	}
	if r.down == "" || freed {
		r.warn("disk full: flight recorder dropped and its files deleted to keep the finding log", "dir", r.dir, "freed", freed)
	}
	r.down, r.retryAt = "disk full", now.Add(recorderRetry)
	r.m.recorderUp.Set(0)
	r.m.recorderErrors.Inc()
	return freed
}

type flightFile struct {
	path  string
	size  int64
	mtime time.Time
}

// files lists the recorder's files, oldest first.
func (r *recorder) files() []flightFile {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return nil
	}
	var out []flightFile
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), flightPrefix) || e.IsDir() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, flightFile{filepath.Join(r.dir, e.Name()), fi.Size(), fi.ModTime()})
	}
	slices.SortFunc(out, func(a, b flightFile) int { return a.mtime.Compare(b.mtime) })
	return out
}

// paths lists the recorder's files, oldest first.
func (r *recorder) paths() []string {
	var out []string
	for _, f := range r.files() {
		out = append(out, f.path)
	}
	return out
}

// prune deletes files older than maxAge and, oldest first, beyond maxBytes;
// never the file being written.
func (r *recorder) prune(now time.Time) {
	fs := r.files()
	active := ""
	if r.w != nil {
		if cur := r.w.Files(); len(cur) > 0 {
			active = cur[len(cur)-1]
		}
	}
	var total int64
	for _, f := range fs {
		total += f.size
	}
	for _, f := range fs {
		if f.path == active {
			continue
		}
		old := r.maxAge > 0 && now.Sub(f.mtime) > r.maxAge
		if !old && total <= r.maxBytes {
			continue
		}
		if os.Remove(f.path) == nil {
			total -= f.size
		}
	}
	r.m.recorderBytes.Set(float64(total))
}

// stop closes the current session (its files get their end records).
func (r *recorder) stop() {
	if r.w == nil {
		return
	}
	if err := r.w.Close(); err != nil {
		r.warn("closing the flight recorder", "err", err)
	}
	r.w = nil
	r.m.recorderUp.Set(0)
}
