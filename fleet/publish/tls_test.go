package publish

import (
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The publisher speaks TLS with a client certificate, as --nats-tls-ca,
// --nats-tls-cert and --nats-tls-key say, to a server that requires one.
func TestPublisherOverTLSWithAClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, cert := fleettest.PKI(t, dir)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoSigs: true, NoLog: true, TLS: true, TLSVerify: true,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: ca, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("tls server not ready")
	}
	url := s.ClientURL()
	o := natsconn.NATSOptions{URL: url, TLSCA: filepath.Join(dir, "ca.pem"), TLSCert: filepath.Join(dir, "client.pem"), TLSKey: filepath.Join(dir, "client-key.pem")}
	p, err := NewPublisher(PublishConfig{NATS: o, Host: "hostA", QueueDir: filepath.Join(t.TempDir(), "q")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	p.Line(findingline.New(apm.Finding{ID: 7, Kind: apm.MissedRearm}, "hostA"))
	fleettest.WaitFor(t, 20*time.Second, "the line stored over TLS", func() bool { return p.q.Stats().Pending == 0 && sent(p) == 1 })

	// without the client certificate the server refuses: the line waits on disk
	o.TLSCert, o.TLSKey = "", ""
	q, err := NewPublisher(PublishConfig{NATS: o, Host: "hostB", QueueDir: filepath.Join(t.TempDir(), "q")})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close(0)
	q.Line(findingline.New(apm.Finding{ID: 8, Kind: apm.MissedRearm}, "hostB"))
	fleettest.WaitFor(t, 10*time.Second, "the line queued", func() bool { return q.q.Stats().Pending == 1 })
	time.Sleep(2 * time.Second)
	if sent(q) != 0 || q.q.Stats().Pending != 1 {
		t.Fatalf("sent %v without a client certificate", sent(q))
	}
}

func sent(p *Publisher) float64 { return testutil.ToFloat64(p.m.sent) }
