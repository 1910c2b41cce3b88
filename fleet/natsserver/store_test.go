package natsserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The embedded server refuses a store another user could have planted or
// can write to; its own fresh one is made 0750.
func TestStoreMustBeOwn(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if s, err := StartEmbedded("127.0.0.1:0", shared); err == nil || !strings.Contains(err.Error(), "nats store") {
		if s != nil {
			s.Shutdown()
		}
		t.Fatalf("a world-writable store: %v", err)
	}
	fresh := filepath.Join(t.TempDir(), "fresh", "store")
	s, err := StartEmbedded("127.0.0.1:0", fresh)
	if err != nil {
		t.Fatalf("a fresh store: %v", err)
	}
	s.Shutdown()
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("the fresh store: %v %v", fi, err)
	}
}
