package fleettest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/natsserver"
	"github.com/nats-io/nats.go/jetstream"
)

// AddUsers authorizes node17, node18 (hosts) and fleet in a new file.
func AddUsers(t *testing.T, dir string) (authPath string) {
	t.Helper()
	authPath = filepath.Join(dir, "auth.conf")
	for _, u := range []struct {
		name  string
		fleet bool
	}{{"node17", false}, {"node18", false}, {"fleet", true}} {
		nu, err := natsserver.AddUser(authPath, filepath.Join(dir, u.name+".nk"), u.name, u.fleet)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(nu.PublicKey, "U") || nu.Created != (u.name == "node17") {
			t.Fatalf("%s: %+v", u.name, nu)
		}
	}
	return authPath
}

// HostOpts are a host's client options for a file from addUsers.
func HostOpts(url, dir, host string) natsconn.NATSOptions {
	return natsconn.NATSOptions{URL: url, NKeyFile: filepath.Join(dir, host+".nk"), InboxPrefix: natsserver.HostInboxPrefix(host)}
}

// AuthServer starts an embedded server on loopback with the users of
// AddUsers (their files in dir) and makes the streams as the fleet's
// user, as `apmwatch fleet --auth` does when it starts; it returns the
// server's URL. The server stops when the test ends.
func AuthServer(t *testing.T, dir string) string {
	t.Helper()
	srv, err := natsserver.StartServer(natsserver.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), AuthFile: AddUsers(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := FleetUser(srv.URL(), dir).Connect(false)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := natsconn.EnsureStreams(t.Context(), js, natsconn.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	return srv.URL()
}

// FleetUser is the options of the fleet's user of AddUsers.
func FleetUser(url, dir string) natsconn.NATSOptions {
	return natsconn.NATSOptions{URL: url, NKeyFile: filepath.Join(dir, "fleet.nk")}
}
