package metricsrv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// get serves on a free loopback port with opts and returns the status of
// each path.
func get(t *testing.T, paths []string, opts ...Option) []int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := Serve(ctx, addr, prometheus.NewRegistry(), "", func(error) {}, opts...); err != nil {
		t.Fatal(err)
	}
	var codes []int
	for _, p := range paths {
		r, err := http.Get("http://" + addr + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if p == "/debug/pprof/heap?debug=1" && r.StatusCode == 200 && !strings.Contains(string(b), "heap profile") {
			t.Errorf("heap profile: %.80q", b)
		}
		codes = append(codes, r.StatusCode)
	}
	return codes
}

func TestProfilesOnlyWhenAsked(t *testing.T) {
	paths := []string{"/metrics", "/debug/pprof/heap?debug=1"}
	if got := get(t, paths); got[0] != 200 || got[1] != 404 {
		t.Fatalf("without WithProfiles: %v, want [200 404]", got)
	}
	if got := get(t, paths, WithProfiles()); got[0] != 200 || got[1] != 200 {
		t.Fatalf("with WithProfiles: %v, want [200 200]", got)
	}
}

// serveShort serves on a free loopback port with short bounds and returns
// its address; the bounds are restored at the end of the test.
func serveShort(t *testing.T, conns int, idle time.Duration, opts ...Option) string {
	t.Helper()
	oc, oh, oi, or := maxConns, readHeaderTimeout, idleTimeout, readTimeout
	maxConns, readHeaderTimeout, idleTimeout, readTimeout = conns, idle, idle, idle
	t.Cleanup(func() { maxConns, readHeaderTimeout, idleTimeout, readTimeout = oc, oh, oi, or })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := Serve(ctx, addr, prometheus.NewRegistry(), "", func(error) {}, opts...); err != nil {
		t.Fatal(err)
	}
	return addr
}

// closedWithin reports whether the server closes c (a read ends) within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

// A connection that sends nothing, and a keep-alive one after its
// request, are closed by the server: idle connections cannot pile up.
func TestIdleConnectionsClosed(t *testing.T) {
	addr := serveShort(t, 8, 200*time.Millisecond)
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if !closedWithin(silent, 3*time.Second) {
		t.Error("a connection that sent nothing is still open after 3s")
	}
	ka, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ka.Close()
	fmt.Fprintf(ka, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	if !closedWithin(ka, 3*time.Second) {
		t.Error("an idle keep-alive connection is still open after 3s")
	}
}

// blocking adds /block, whose requests last until the test ends.
func blocking(t *testing.T) Option {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return func(s *settings) {
		s.mux.HandleFunc("/block", func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-done:
			case <-r.Context().Done():
			}
		})
	}
}

// At most maxConns connections are open at once: a new one closes the
// oldest idle one, and is itself closed when all are inside a request.
func TestConnectionCap(t *testing.T) {
	addr := serveShort(t, 2, 10*time.Second, blocking(t))
	dial := func(busy bool) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if busy {
			fmt.Fprintf(c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
		}
		return c
	}
	scrape := func(c net.Conn) (string, error) {
		fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 64)
		n, err := c.Read(b)
		return string(b[:n]), err
	}
	idle := []net.Conn{dial(false), dial(false)}
	if got, err := scrape(dial(false)); err != nil || !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Fatalf("a third connection while two were idle: %q, %v", got, err)
	}
	if !closedWithin(idle[0], 5*time.Second) {
		t.Error("the oldest idle connection was not closed to make room")
	}
	busy := []net.Conn{dial(true), dial(true)}
	time.Sleep(100 * time.Millisecond) // both inside their request
	if got, err := scrape(dial(false)); err == nil {
		t.Fatalf("a connection over the cap while all were inside a request was served: %q", got)
	}
	busy[0].Close()
	var got string
	for i := 0; i < 50 && !strings.HasPrefix(got, "HTTP/1.1 200"); i++ { // until the server sees it gone
		time.Sleep(20 * time.Millisecond)
		got, _ = scrape(dial(false))
	}
	if !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Fatalf("after one busy connection went: %q", got)
	}
}

// Profiles never show the command line (the daemon's flags) and are
// bounded in length.
func TestProfilesBounded(t *testing.T) {
	got := get(t, []string{"/debug/pprof/cmdline", "/debug/pprof/profile?seconds=3600", "/debug/pprof/trace?seconds=x"}, WithProfiles())
	if got[0] != 404 || got[1] != 400 || got[2] != 400 {
		t.Fatalf("cmdline, a 1-hour profile, a bad trace length: %v, want [404 400 400]", got)
	}
}
