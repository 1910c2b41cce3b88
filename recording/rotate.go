package recording

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/apmwatch/apmwatch/internal/outfile"
)

func segmentPath(prefix string, seg uint32) string { return fmt.Sprintf("%s.%06d", prefix, seg) }

// rotate ends the current file and continues in the next one.
func (w *Writer) rotate() error {
	w.rotating = true
	defer func() { w.rotating = false }()
	if err := w.appendRecord(record{end: true}); err != nil {
		return err
	}
	if err := w.sync(); err != nil {
		return err
	}
	if err := w.file.Close(); err != nil {
		w.err = fmt.Errorf("closing recording %s: %w", w.name, err)
		return w.err
	}
	seg := w.hdr.Segment + 1
	name := segmentPath(w.prefix, seg)
	f, err := outfile.Create(name, os.O_TRUNC)
	if err != nil {
		w.err = fmt.Errorf("rotating recording: %w", err)
		return w.err
	}
	w.out, w.file, w.name = f, f, name
	w.hdr.Segment, w.hdr.Created = seg, time.Now()
	w.count, w.size = endRecord{}, 0
	w.files = append(w.files, name)
	if err := w.writeHeader(); err != nil {
		return err
	}
	for w.opts.MaxFiles > 0 && len(w.files) > w.opts.MaxFiles {
		if err := os.Remove(w.files[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.err = fmt.Errorf("removing old recording: %w", err)
			return w.err
		}
		w.files = w.files[1:]
	}
	return nil
}

// Files returns the files written so far that still exist, oldest first.
func (w *Writer) Files() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.prefix == "" {
		return []string{w.name}
	}
	return append([]string(nil), w.files...)
}
