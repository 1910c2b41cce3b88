// Package testkit holds the test helpers several packages share: golden
// files, and replaying a recording into the APM model. Imported by tests
// only.
package testkit

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/recording"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// Golden compares got with testdata/NAME; with -update it writes the file
// first.
func Golden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (-update to accept):\n%s", path, got)
	}
}

// Replay runs the recording at path through a fresh model with cfg, judged
// until judge (Boot ns), and returns every finding and resolution. A
// recording that reads with warnings fails the test.
func Replay(t testing.TB, path string, cfg apm.Config, judge uint64) []apm.Finding {
	t.Helper()
	r, err := recording.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []apm.Finding
	m, err := apm.New(cfg, func(f apm.Finding) { out = append(out, f) })
	if err != nil {
		t.Fatal(err)
	}
	for {
		e, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		m.Handle(e)
	}
	m.Finish(judge)
	if w := r.Warnings(); len(w) != 0 {
		t.Fatalf("%s: recording warnings: %v", path, w)
	}
	return out
}
