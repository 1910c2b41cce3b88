package metricsrv

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// hog opens n connections to addr from the loopback address from (sending
// first, when not ""), kept open until the test ends.
func hog(t *testing.T, addr, from string, n int, first string) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	for i := 0; i < n; i++ {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		if first != "" {
			fmt.Fprint(c, first)
		}
	}
}

// scrapeFrom gets /metrics from the loopback address from. The client's
// timeout only ends the test on failure.
func scrapeFrom(t *testing.T, addr, from string) error {
	t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}
	defer tr.CloseIdleConnections()
	cl := http.Client{Transport: tr, Timeout: 20 * time.Second}
	r, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return err
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != 200 || !strings.Contains(string(b), "#") && len(b) != 0 {
		return fmt.Errorf("status %d: %.80q", r.StatusCode, b)
	}
	return nil
}

// Many connections from one client that send nothing (and never time out
// during the test) take no slot a scrape needs: a scrape from another
// client, and one from the same client, still succeed.
func TestIdleConnectionsDoNotStarveScrapes(t *testing.T) {
	addr := serveShort(t, 32, time.Hour)
	hog(t, addr, "127.0.0.1", 200, "")
	if err := scrapeFrom(t, addr, "127.0.0.2"); err != nil {
		t.Fatalf("scrape from another client behind 200 idle connections: %v", err)
	}
	if err := scrapeFrom(t, addr, "127.0.0.1"); err != nil {
		t.Fatalf("scrape from the same client behind 200 idle connections: %v", err)
	}
}

// Connections that never finish their request's header are idle to the
// limit: another client's scrape succeeds behind 200 of them.
func TestUnfinishedHeadersDoNotStarveScrapes(t *testing.T) {
	addr := serveShort(t, 32, time.Hour)
	hog(t, addr, "127.0.0.1", 200, "GET /metrics HTTP/1.1\r\n")
	if err := scrapeFrom(t, addr, "127.0.0.2"); err != nil {
		t.Fatalf("scrape from another client behind 200 unfinished requests: %v", err)
	}
}

// Requests in progress are held to maxConnsPerClient from one client: the
// next from that client is closed, another client's scrape succeeds.
func TestBusyConnectionsHeldToClientShare(t *testing.T) {
	addr := serveShort(t, 32, time.Hour, blocking(t))
	hog(t, addr, "127.0.0.1", maxConnsPerClient, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(100 * time.Millisecond) // all inside their request
	if err := scrapeFrom(t, addr, "127.0.0.1"); err == nil {
		t.Fatalf("a connection over the client's share was served")
	}
	if err := scrapeFrom(t, addr, "127.0.0.2"); err != nil {
		t.Fatalf("scrape from another client: %v", err)
	}
}
