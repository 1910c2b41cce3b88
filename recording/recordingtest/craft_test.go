package recordingtest

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestWrite writes the crafted files for a measurement by hand:
//
//	CRAFT_DIR=/tmp/craft CRAFT_SIZE=16000000 go test -run TestWrite ./recording/recordingtest
//
// and checks their sizes otherwise.
func TestWrite(t *testing.T) {
	dir, size := os.Getenv("CRAFT_DIR"), 1<<20
	if s := os.Getenv("CRAFT_SIZE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		size = n
	}
	for _, f := range Files(size) {
		if len(f.Data) > size || len(f.Data) < size/2 && f.Name != "header-hooks" {
			t.Errorf("%s: %d bytes for %d", f.Name, len(f.Data), size)
		}
		if dir != "" {
			if err := os.WriteFile(filepath.Join(dir, f.Name+".rec"), f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
