package natsserver_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsserver"
)

// add-host's file: a new file and the seeds are 0600; a host already in
// it, a seed file that exists, and a file without the marker line are
// refused, leaving the file as it was.
func TestAddUserWritesTheSeedAndTheAuthorization(t *testing.T) {
	dir := t.TempDir()
	authPath := fleettest.AddUsers(t, dir)
	for _, f := range []string{authPath, filepath.Join(dir, "node17.nk"), filepath.Join(dir, "fleet.nk")} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", f, err, fi.Mode())
		}
	}
	seed, _ := os.ReadFile(filepath.Join(dir, "node17.nk"))
	before, _ := os.ReadFile(authPath)
	if !bytes.HasPrefix(seed, []byte("SU")) || bytes.Contains(before, bytes.TrimSpace(seed)) {
		t.Fatalf("seed %q, or the seed in the authorization file", seed)
	}
	if _, err := natsserver.LoadAuth(authPath); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		seed, name, want string
	}{
		{"again.nk", "node17", "already in"},
		{"node17.nk", "node19", "exists"},
	} {
		_, err := natsserver.AddUser(authPath, filepath.Join(dir, tc.seed), tc.name, false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s into %s: %v, want %q", tc.name, tc.seed, err, tc.want)
		}
		if after, _ := os.ReadFile(authPath); !bytes.Equal(after, before) {
			t.Errorf("%s: the file changed", tc.name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "again.nk")); err == nil {
		t.Error("a seed was written for a host refused")
	}
	bare := filepath.Join(dir, "bare.conf")
	os.WriteFile(bare, []byte("authorization { users: [ {user: a, password: b} ] }\n"), 0o600)
	if _, err := natsserver.AddUser(bare, filepath.Join(dir, "n.nk"), "n", false); err == nil || !strings.Contains(err.Error(), "by hand") {
		t.Errorf("a file without the marker: %v", err)
	}
	os.Chmod(authPath, 0o644)
	if _, err := natsserver.LoadAuth(authPath); err == nil || !strings.Contains(err.Error(), "chmod") {
		t.Errorf("an authorization file everyone may read: %v", err)
	}
}
