package recording_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/recording"
	"github.com/apmwatch/apmwatch/recording/recordingtest"
)

// Every crafted file (recording/recordingtest: each uses a count or length the
// format allows against the reader) reads back in memory and records
// bounded by its size, with a warning or an error naming the bound.
func TestHostileFilesBounded(t *testing.T) {
	const size = 2 << 20
	want := map[string]string{ // what the reader says about each
		"stats-per-cpu":     "more than 16384 cpus",
		"fake-frames":       "resynchronising checked",
		"zstd-bomb":         "more than one record per byte",
		"long-strings":      "more than 512",
		"header-hooks":      "more than 1048576",
		"create-flood":      "no end record",
		"reorder-backwards": "",
		"same-event":        "expand more than 64 times",
		"same-event-x50":    "", // at 16 MB: more than one record per byte
	}
	for _, f := range recordingtest.Files(size) {
		t.Run(f.Name, func(t *testing.T) {
			runtime.GC()
			var peak uint64
			sample := func() {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
			}
			var said []string
			r, err := recording.NewReader(bytes.NewReader(f.Data), f.Name, recording.ReadOptions{
				OnWarning: func(w recording.Warning) { said = append(said, w.String()) }})
			records := 0
			if err != nil {
				said = append(said, err.Error())
			} else {
				for {
					_, err := r.Next(context.Background())
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if records++; records%4096 == 0 {
						sample()
					}
				}
				if n := len(r.Stats().LostPerCPU); n > 1<<14 {
					t.Errorf("%d per-cpu counters kept", n)
				}
			}
			sample()
			// Live memory: the file's data, the reader's window (at most a
			// 16 MiB frame), a 5 MiB block, garbage the GC has not taken yet.
			t.Logf("peak heap %d MiB, %d records", peak>>20, records)
			if limit := uint64(64<<20 + 2*len(f.Data)); peak > limit {
				t.Errorf("peak heap %d MiB reading %d KiB (limit %d MiB)", peak>>20, len(f.Data)>>10, limit>>20)
			}
			if records > len(f.Data)+1<<20 {
				t.Errorf("%d records from %d bytes", records, len(f.Data))
			}
			if w := want[f.Name]; w != "" && !strings.Contains(strings.Join(said, "\n"), w) {
				t.Errorf("no warning saying %q:\n%s", w, strings.Join(said, "\n"))
			}
		})
	}
}

// A recording is created 0640 whatever the umask, never through a
// symbolic link (a root recorder must not overwrite what a link names).
func TestCreateModeAndSymlink(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(dir, "a.rec")
	w, err := recording.Create(path, event.Meta{Host: "h"}, recording.Options{FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	link := filepath.Join(dir, "link.rec")
	os.Symlink(filepath.Join(dir, "victim"), link)
	_, err = recording.Create(link, event.Meta{Host: "h"}, recording.Options{FlushInterval: -1})
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("create through a link: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "victim")); err == nil {
		t.Fatal("the link's target was created")
	}
	_, err = recording.Open(dir)
	if err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("open a directory: %v", err)
	}
}
