package fleettest

import (
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSServers returns the servers a test of the streams runs against:
// the embedded one, and a separate nats-server process of the same
// version (natsproc_test.go).
func NATSServers(t *testing.T) map[string]string {
	t.Helper()
	srv := StartServer(t, "127.0.0.1:0", t.TempDir())
	t.Cleanup(srv.Shutdown)
	return map[string]string{"embedded": srv.URL(), "nats-server": StartNATSServer(t)}
}

// StartNATSServer starts one nats-server process with JetStream on
// loopback, for the test's life, and returns its URL.
func StartNATSServer(t *testing.T) string {
	t.Helper()
	url, _ := StartNATSServerPID(t)
	return url
}

// StartNATSServerPID is startNATSServer, with the process's ID.
func StartNATSServerPID(t *testing.T) (string, int) {
	t.Helper()
	bin := NATSServerBinary(t)
	addr := FreePort(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", port, "-js", "-sd", filepath.Join(t.TempDir(), "js"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := "nats://" + addr
	WaitFor(t, 10*time.Second, "nats-server", func() bool {
		nc, err := nats.Connect(url)
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
	return url, cmd.Process.Pid
}

func JS(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	js := JetStream(t, url)
	if err := natsconn.EnsureStreams(context.Background(), js, natsconn.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	return js
}

// Store publishes records on their subjects and waits for the stream to
// acknowledge every one.
func Store(t *testing.T, js jetstream.JetStream, cs ...wire.Conn) {
	t.Helper()
	for i := range cs {
		b, err := json.Marshal(&cs[i])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishAsync(wire.ConnSubject(&cs[i]), b); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("records not acknowledged in 30s")
	}
}

// filler is one of n unpaired ends of hostC, in revision rev.
func filler(i, rev int) wire.Conn {
	c := Dated(Conn("hostC", 40, uint32(1000+i), 41, uint32(5000+i)))
	c.Run, c.Rev, c.At = "hostC-1", uint64(rev), Base.Add(time.Duration(rev)*time.Second)
	return c
}

// Fillers stores rounds revisions of n ends, an end's one after
// another: past the first thousand ends' last records come earlier
// revisions of the others.
func Fillers(t *testing.T, js jetstream.JetStream, n, rounds int) {
	t.Helper()
	var cs []wire.Conn
	for i := range n {
		for r := 1; r <= rounds; r++ {
			cs = append(cs, filler(i, r))
		}
	}
	Store(t, js, cs...)
}
