package fleet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// pki writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, PEM, to dir.
func pki(t *testing.T, dir string) (ca *x509.CertPool, serverCert tls.Certificate) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "apmwatch test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write("ca.pem", "CERTIFICATE", caDER)
	issue := func(name string, serial int64, usage x509.ExtKeyUsage, ips []net.IP) tls.Certificate {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, IPAddresses: ips,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(k)
		write(name+".pem", "CERTIFICATE", der)
		write(name+"-key.pem", "EC PRIVATE KEY", kder)
		c, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	serverCert = issue("server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	issue("client", 3, x509.ExtKeyUsageClientAuth, nil)
	ca = x509.NewCertPool()
	ca.AddCert(caCert)
	return ca, serverCert
}

// The publisher speaks TLS with a client certificate, as --nats-tls-ca,
// --nats-tls-cert and --nats-tls-key say, to a server that requires one.
func TestPublisherOverTLSWithAClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, cert := pki(t, dir)
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
	o := NATSOptions{URL: url, TLSCA: filepath.Join(dir, "ca.pem"), TLSCert: filepath.Join(dir, "client.pem"), TLSKey: filepath.Join(dir, "client-key.pem")}
	p, err := NewPublisher(PublishConfig{NATS: o, Host: "hostA", QueueDir: filepath.Join(t.TempDir(), "q")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	p.Line(findingline.New(apm.Finding{ID: 7, Kind: apm.MissedRearm}, "hostA"))
	waitFor(t, 20*time.Second, "the line stored over TLS", func() bool { return p.q.Stats().Pending == 0 && sent(p) == 1 })

	// without the client certificate the server refuses: the line waits on disk
	o.TLSCert, o.TLSKey = "", ""
	q, err := NewPublisher(PublishConfig{NATS: o, Host: "hostB", QueueDir: filepath.Join(t.TempDir(), "q")})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close(0)
	q.Line(findingline.New(apm.Finding{ID: 8, Kind: apm.MissedRearm}, "hostB"))
	waitFor(t, 10*time.Second, "the line queued", func() bool { return q.q.Stats().Pending == 1 })
	time.Sleep(2 * time.Second)
	if sent(q) != 0 || q.q.Stats().Pending != 1 {
		t.Fatalf("sent %v without a client certificate", sent(q))
	}
}

func sent(p *Publisher) float64 { return testutil.ToFloat64(p.m.sent) }
