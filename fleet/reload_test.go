package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsserver"
)

// A host added to the --auth file after the server started connects once
// the server reloads the file (SIGHUP); a file that no longer loads leaves
// the server's users as they were.
func TestReloadTakesAHostAddedLater(t *testing.T) {
	dir := t.TempDir()
	authPath := fleettest.AddUsers(t, dir)
	srv, err := natsserver.StartServer(natsserver.ServerConfig{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "store"), AuthFile: authPath})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	url := srv.URL()
	if _, err := natsserver.AddUser(authPath, filepath.Join(dir, "node19.nk"), "node19", false); err != nil {
		t.Fatal(err)
	}
	if nc, err := fleettest.HostOpts(url, dir, "node19").Connect(false); err == nil {
		nc.Close()
		t.Fatal("a host added after the start connected before a reload")
	}
	if err := srv.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	nc, err := fleettest.HostOpts(url, dir, "node19").Connect(false)
	if err != nil {
		t.Fatalf("node19 after the reload: %v", err)
	}
	nc.Close()
	if nc, err := fleettest.HostOpts(url, dir, "node17").Connect(false); err != nil {
		t.Fatalf("node17, there from the start, after the reload: %v", err)
	} else {
		nc.Close()
	}

	// a damaged file: refused, the users stay
	if err := os.WriteFile(authPath, []byte("authorization { users = [ \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(); err == nil || !strings.Contains(err.Error(), "--auth") {
		t.Fatalf("reload of a damaged file: %v, want an error naming --auth", err)
	}
	if nc, err := fleettest.HostOpts(url, dir, "node19").Connect(false); err != nil {
		t.Fatalf("node19 after a refused reload: %v", err)
	} else {
		nc.Close()
	}

	// a server without --auth has nothing to reload
	open, err := natsserver.StartServer(natsserver.ServerConfig{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "store2")})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Shutdown()
	if err := open.Reload(); err == nil {
		t.Error("reload without --auth: no error")
	}
}
