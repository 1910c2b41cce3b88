package fleet

import (
	"fmt"
	"os"
	"sync"

	"github.com/apmwatch/apmwatch/internal/outfile"
)

// findingsFile is the finding log (--findings), appended to, reopened on
// SIGHUP once logrotate moved it (TestFleetReopensItsFindingLog).
type findingsFile struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

func openFindingsFile(path string) (*findingsFile, error) {
	f, err := outfile.Create(path, os.O_APPEND)
	if err != nil {
		return nil, fmt.Errorf("opening the finding log: %w", err)
	}
	return &findingsFile{path: path, f: f}, nil
}

func (w *findingsFile) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Write(p)
}

// Reopen opens the path anew, then closes the file it replaces: a line
// goes to one or the other, never nowhere. On an error the old file stays.
func (w *findingsFile) Reopen() error {
	f, err := outfile.Create(w.path, os.O_APPEND)
	if err != nil {
		return fmt.Errorf("reopening the finding log: %w", err)
	}
	w.mu.Lock()
	old := w.f
	w.f = f
	w.mu.Unlock()
	return old.Close()
}

func (w *findingsFile) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Close()
}
