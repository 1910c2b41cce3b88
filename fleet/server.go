package fleet

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/apmwatch/apmwatch/internal/outfile"
	"github.com/nats-io/nats-server/v2/server"
)

// DefaultListen is where `apmwatch fleet` with no --nats serves its
// embedded NATS (a contract: scripts publish to nats://127.0.0.1:4222).
const DefaultListen = "127.0.0.1:4222"

// Embedded is a NATS server with JetStream inside the process: the
// single-machine default of `apmwatch fleet`, and the tests' server.
type Embedded struct {
	s *server.Server
}

// StartEmbedded serves NATS with JetStream on listen (host:port; port 0
// picks one), storing streams under dir.
func StartEmbedded(listen, dir string) (*Embedded, error) {
	host, ps, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("bad --listen %q: want host:port", listen)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("bad --listen %q: want host:port", listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if err := outfile.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("nats store: %w", err)
	}
	// The streams are what the fleet judges: a store another local user
	// made first (the default falls back to a fixed path under the
	// temporary directory) or can write to is refused.
	if err := outfile.OwnDir(dir); err != nil {
		return nil, fmt.Errorf("nats store: %w", err)
	}
	s, err := server.NewServer(&server.Options{ServerName: "apmwatch-fleet", Host: host, Port: port, JetStream: true,
		StoreDir: dir, NoSigs: true, NoLog: true, MaxPayload: 1 << 20})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded nats: not serving on %s after 10s (address in use?)", listen)
	}
	return &Embedded{s: s}, nil
}

// URL is the client URL.
func (e *Embedded) URL() string { return e.s.ClientURL() }

// Shutdown stops the server.
func (e *Embedded) Shutdown() {
	e.s.Shutdown()
	e.s.WaitForShutdown()
}
