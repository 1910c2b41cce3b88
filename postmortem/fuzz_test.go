package postmortem

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/recording/recordingtest"
)

// FuzzReplay runs the whole postmortem on arbitrary bytes: reader, model,
// pairing and the three reports (`make fuzz-replay` runs it for FUZZTIME
// in `make test`). With fix set the frame checksums are repaired first, so
// mutations reach the decoders and the model. Nothing may panic, the text
// report may hold no control character, the JSON must be valid, and the
// events replayed stay within one per byte of file (plus the reader's
// allowance).
func FuzzReplay(f *testing.F) {
	dir := f.TempDir()
	o := Options{Config: apm.DefaultConfig(), MaxEntries: 100}
	o.Config.MaxQPs = 1000
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			recordingtest.FixChecksums(data)
		}
		path := filepath.Join(dir, "f.rec")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), []string{path}, o)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of several lines: %q", err)
			}
			return
		}
		if r.Summary.Events > uint64(len(data))+1<<20 {
			t.Fatalf("%d events from %d bytes", r.Summary.Events, len(data))
		}
		var text, js, html bytes.Buffer
		if err := WriteText(&text, r); err != nil {
			t.Fatal(err)
		}
		for _, c := range text.String() {
			if (c < 0x20 && c != '\n' && c != '\t') || (c >= 0x7f && c <= 0x9f) {
				t.Fatalf("control %U in the text report:\n%q", c, text.String())
			}
		}
		if err := WriteJSON(&js, r); err != nil || !json.Valid(js.Bytes()) {
			t.Fatalf("json: %v", err)
		}
		if err := WriteHTML(&html, r); err != nil {
			t.Fatal(err)
		}
	})
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpus in testdata/fuzz/FuzzReplay")

// TestReplaySeedCorpus checks the committed seed corpus of FuzzReplay is
// there, and writes it with -update-corpus: the lab's example recordings
// and small hostile files (recording/recordingtest).
func TestReplaySeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReplay")
	seeds := map[string][]byte{}
	examples, _ := filepath.Glob(filepath.Join("..", "examples", "*.rec"))
	for _, p := range examples {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		seeds["example-"+strings.TrimSuffix(filepath.Base(p), ".rec")] = b
	}
	for _, c := range recordingtest.Files(8 << 10) {
		// More than the header; not the files that decompress to the
		// reader's allowance (a second an input: they would slow the fuzzer).
		if len(c.Data) > 200 && !strings.HasPrefix(c.Name, "same-event") {
			seeds["craft-"+c.Name] = c.Data
		}
	}
	if !*updateCorpus {
		for name := range seeds {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Errorf("seed %s missing: go test ./postmortem -run TestReplaySeedCorpus -update-corpus", name)
			}
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range seeds {
		for _, fix := range []bool{false} {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%v)\n", data, fix)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
