package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/apmwatch/apmwatch/internal/outfile"
)

// maxPending bounds the lines kept in memory while the file cannot be
// written (disk full); older ones are dropped and counted.
const maxPending = 10000

// fileOpener opens the finding log for appending (os.OpenFile; a fake in
// tests).
type fileOpener func(path string) (io.WriteCloser, error)

func openAppend(path string) (io.WriteCloser, error) {
	return outfile.Create(path, os.O_APPEND)
}

// findLog writes finding lines to a file and/or a stream. Lines the file
// refuses (disk full) wait in memory, whole, and are written in order once
// there is room; the daemon frees room by dropping the flight recorder
// first (freeSpace).
type findLog struct {
	path      string
	open      fileOpener
	f         io.WriteCloser
	stdout    io.Writer
	pending   [][]byte // not yet in the file; pending[0] may be a line's tail
	freeSpace func() bool
	full      bool // the last write failed for lack of space
	m         *metrics
	warn      func(msg string, args ...any)
}

func newFindLog(path string, open fileOpener, stdout io.Writer, m *metrics, warn func(string, ...any)) (*findLog, error) {
	l := &findLog{path: path, open: open, stdout: stdout, m: m, warn: warn, freeSpace: func() bool { return false }}
	if path != "" {
		f, err := open(path)
		if err != nil {
			return nil, fmt.Errorf("opening the finding log: %w", err)
		}
		l.f = f
	}
	return l, nil
}

// write appends one line. It never fails the daemon: errors are logged and
// counted, and file lines are kept for a retry.
func (l *findLog) write(line findingline.Line) {
	b, err := json.Marshal(escape.Value(line)) // host strings escaped, valid UTF-8
	if err != nil {                            // cannot happen for these types; say so anyway
		l.warn("cannot encode a finding", "id", line.ID, "err", err)
		return
	}
	b = append(b, '\n')
	if l.stdout != nil {
		if _, err := l.stdout.Write(b); err != nil {
			l.m.findingWriteErrors.WithLabelValues("stdout").Inc()
		}
	}
	if l.f == nil && l.path == "" {
		return
	}
	if len(l.pending) >= maxPending {
		l.pending = l.pending[1:]
		l.m.findingsDropped.Inc()
	}
	l.pending = append(l.pending, b)
	l.flush()
}

// flush writes the pending lines in order; on a full disk it asks for space
// once and tries again.
func (l *findLog) flush() {
	if len(l.pending) == 0 {
		return
	}
	err := l.writePending()
	if err != nil && noSpace(err) {
		if l.freeSpace() {
			err = l.writePending()
		}
	}
	switch {
	case err == nil:
		if l.full {
			l.warn("the finding log is writable again", "file", l.path)
			l.full = false
		}
	case noSpace(err):
		if !l.full {
			l.warn("disk full: finding lines wait in memory", "file", l.path, "waiting", len(l.pending), "err", err)
			l.full = true
		}
		l.m.findingWriteErrors.WithLabelValues("file").Inc()
	default:
		l.warn("cannot write the finding log", "file", l.path, "err", err)
		l.m.findingWriteErrors.WithLabelValues("file").Inc()
	}
	l.m.findingsPending.Set(float64(len(l.pending)))
}

func (l *findLog) writePending() error {
	if l.f == nil {
		if err := l.reopen(); err != nil {
			return err
		}
	}
	for len(l.pending) > 0 {
		n, err := l.f.Write(l.pending[0])
		if err != nil {
			l.pending[0] = l.pending[0][n:] // keep the line's tail: the file stays whole lines
			return err
		}
		l.pending[0] = nil
		l.pending = l.pending[1:]
	}
	return nil
}

// reopen closes and reopens the file (SIGHUP, after log rotation).
func (l *findLog) reopen() error {
	if l.path == "" {
		return nil
	}
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	f, err := l.open(l.path)
	if err != nil {
		return fmt.Errorf("reopening the finding log: %w", err)
	}
	l.f = f
	return nil
}

func (l *findLog) close() error {
	l.flush()
	if n := len(l.pending); n > 0 {
		l.warn("finding lines lost at exit: the file could not take them", "file", l.path, "lines", n)
	}
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("closing the finding log: %w", err)
	}
	return nil
}

// noSpace reports a full disk or quota.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
