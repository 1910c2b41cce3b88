package session

import (
	"errors"
	"fmt"
	"time"
)

// minReconcile is the shortest --reconcile-interval: a reading lists every
// QP of the host.
const minReconcile = 100 * time.Millisecond

func checkRun(duration, reconcile time.Duration) error {
	if duration < 0 {
		return fmt.Errorf("--duration must not be negative (0: until interrupted): %v", duration)
	}
	if reconcile < 0 || (reconcile > 0 && reconcile < minReconcile) {
		return fmt.Errorf("--reconcile-interval must be 0 (off) or at least %v: %v", minReconcile, reconcile)
	}
	return nil
}

// Validate reports the first bad option of a trace in one lowercase line.
func (c TraceConfig) Validate() error {
	if err := checkRun(c.Duration, c.Reconcile); err != nil {
		return err
	}
	return c.Model.Validate()
}

// Validate reports the first bad option of a recording in one lowercase
// line.
func (c Config) Validate() error {
	if c.Path == "" {
		return errors.New("no output file: give -o FILE")
	}
	if err := checkRun(c.Duration, c.Reconcile); err != nil {
		return err
	}
	if c.Options.MaxBytes < 0 || c.Options.MaxFiles < 0 {
		return fmt.Errorf("--rotate-size and --rotate-keep must not be negative: %d, %d", c.Options.MaxBytes, c.Options.MaxFiles)
	}
	if c.Options.MaxFiles > 0 && c.Options.MaxBytes == 0 {
		return errors.New("--rotate-keep needs --rotate-size")
	}
	return nil
}
