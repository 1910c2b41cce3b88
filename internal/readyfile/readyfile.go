// Package readyfile writes the ready file of a live command: the source's
// Meta (hooks, kernel) as one JSON line, put in place by a rename, so that a
// script or a test waiting for the file reads it whole and knows the probes
// are attached.
package readyfile

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/outfile"
)

// Write writes meta as JSON to path (through path.tmp and a rename).
func Write(path string, meta event.Meta) error {
	b, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("writing the ready file: %w", err)
	}
	tmp := path + ".tmp"
	if err := outfile.WriteFile(tmp, append(b, '\n')); err != nil {
		return fmt.Errorf("writing the ready file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the ready file: %w", err)
	}
	return nil
}
