package fleettest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/natsserver"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// FreePort returns a port nobody listens on now, so that a test can stop
// and start its server on the same address.
func FreePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func StartServer(t *testing.T, listen, dir string) *natsserver.Embedded {
	t.Helper()
	s, err := natsserver.StartEmbedded(listen, dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FakeSysfs makes /sys/class/infiniband/DEV/ports/1/{lid,gids/0}.
func FakeSysfs(t *testing.T, root, dev string, lid uint16, gid string) {
	t.Helper()
	dir := filepath.Join(root, dev, "ports", "1")
	if err := os.MkdirAll(filepath.Join(dir, "gids"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "lid"), []byte("0x"+strconv.FormatUint(uint64(lid), 16)+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "gids", "0"), []byte(gid+"\n"), 0o644)
}

// WaitFor polls cond every 20ms; the limit only ends a hung test.
func WaitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StreamMsgs returns the messages of a stream on a subject filter.
func StreamMsgs(t *testing.T, url, stream, filter string) [][]byte {
	t.Helper()
	out, err := TryStreamMsgs(url, stream, filter)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TryStreamMsgs(url, stream, filter string) ([][]byte, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var out [][]byte
	_, err = natsconn.ReadAll(context.Background(), js, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}}, func(m jetstream.Msg) {
		if wire.IsHeartbeat(m.Subject()) && !wire.IsHeartbeat(filter) {
			return // the hosts' heartbeats: not records
		}
		out = append(out, m.Data())
	})
	return out, err
}

// JetStream is JetStream on a connection of its own to url, closed
// when the test ends.
func JetStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// onCluster: the fleet tests run against a 3-node cluster of nats-server
// processes (APMWATCH_FLEET_NATS=cluster, make fleet-faults) instead of
// the embedded server.
func OnCluster() bool { return os.Getenv("APMWATCH_FLEET_NATS") == "cluster" }

// NATS is the NATS a fleet test runs against, stopped when the test
// ends: the embedded server, or a 3-node cluster whose streams are R3
// (created here, before any publisher or instance would make them R1).
func NATS(t *testing.T) string {
	t.Helper()
	url := NATSBare(t)
	if !OnCluster() {
		return url
	}
	l := natsconn.DefaultLimits
	l.Replicas = 3
	if err := natsconn.EnsureStreams(t.Context(), JetStream(t, url), l); err != nil {
		t.Fatal(err)
	}
	return url
}

// NATSBare is NATS without streams: for a test that makes its own.
func NATSBare(t *testing.T) string {
	t.Helper()
	if !OnCluster() {
		srv := StartServer(t, "127.0.0.1:0", t.TempDir())
		t.Cleanup(srv.Shutdown)
		return srv.URL()
	}
	return StartCluster(t, 3).URL()
}
