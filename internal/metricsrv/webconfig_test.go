package metricsrv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"
)

// serveWeb serves with the web configuration text cfg (files beside it
// from files) and returns the address.
func serveWeb(t *testing.T, cfg string, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := Serve(ctx, addr, prometheus.NewRegistry(), "", func(err error) { t.Error(err) }, WithWebConfig(path)); err != nil {
		t.Fatal(err)
	}
	return addr
}

// status gets url with cl, basic auth user:pass when user is not "".
func status(t *testing.T, cl *http.Client, url, user, pass string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	r, err := cl.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	r.Body.Close()
	return r.StatusCode
}

func TestWebConfigBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveWeb(t, "basic_auth_users:\n  prom: "+string(hash)+"\n", nil)
	cl := &http.Client{Timeout: 20 * time.Second}
	url := "http://" + addr + "/metrics"
	if got := status(t, cl, url, "", ""); got != http.StatusUnauthorized {
		t.Errorf("scrape without credentials: %d, want 401", got)
	}
	if got := status(t, cl, url, "prom", "wrong"); got != http.StatusUnauthorized {
		t.Errorf("scrape with a wrong password: %d, want 401", got)
	}
	if got := status(t, cl, url, "prom", "s3cret"); got != http.StatusOK {
		t.Errorf("scrape with the password: %d, want 200", got)
	}
}

// selfSigned returns a certificate for 127.0.0.1 and its key, PEM-encoded.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "apmwatch test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func TestWebConfigTLS(t *testing.T) {
	cert, key := selfSigned(t)
	addr := serveWeb(t, "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
		map[string][]byte{"server.crt": cert, "server.key": key})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cert) {
		t.Fatal("test certificate not parsed")
	}
	cl := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if got := status(t, cl, "https://"+addr+"/metrics", "", ""); got != http.StatusOK {
		t.Errorf("TLS scrape: %d, want 200", got)
	}
	// plain HTTP gets no metrics
	r, err := (&http.Client{Timeout: 20 * time.Second}).Get("http://" + addr + "/metrics")
	if err == nil {
		r.Body.Close()
		if r.StatusCode == http.StatusOK {
			t.Error("a plain HTTP scrape got metrics from the TLS endpoint")
		}
	}
}

// A bad web configuration file is refused at start, in one line.
func TestWebConfigRefused(t *testing.T) {
	dir := t.TempDir()
	for name, cfg := range map[string]string{
		"unknown field": "basic_auth_user:\n  a: b\n",
		"missing cert":  "tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n",
		"not yaml":      "{{{\n\x1b[2J\n",
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(path, []byte(cfg), 0o600)
		err := Serve(context.Background(), "127.0.0.1:0", prometheus.NewRegistry(), "", func(error) {}, WithWebConfig(path))
		if err == nil {
			t.Errorf("%s: served", name)
			continue
		}
		if strings.ContainsAny(err.Error(), "\n\x1b") {
			t.Errorf("%s: error not one escaped line: %q", name, err)
		}
	}
	if err := CheckWebConfig(filepath.Join(dir, "absent.yml")); err == nil {
		t.Error("an absent web config file was accepted")
	}
}

// Whatever the file holds, loading it does not panic and a refusal is one
// bounded, escaped line.
func FuzzWebConfig(f *testing.F) {
	f.Add([]byte("basic_auth_users:\n  prom: $2y$10$abc\n"))
	f.Add([]byte("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n"))
	f.Add([]byte("http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n"))
	f.Add([]byte("rate_limit:\n  burst: 10\n  interval: 1s\n"))
	f.Add([]byte("tls_server_config:\n  cert: |\n    -----BEGIN CERTIFICATE-----\n  min_version: TLS13\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "web.yml")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		err := CheckWebConfig(path)
		if err == nil {
			return
		}
		if s := err.Error(); strings.ContainsAny(s, "\n\r\x1b") || len(s) > 2*maxErrLen+64 {
			t.Fatalf("refusal not one bounded escaped line: %q", s)
		}
	})
}
