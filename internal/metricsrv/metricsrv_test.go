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

// At most maxConns connections are served at once: the next is answered
// only when one of them goes.
func TestConnectionCap(t *testing.T) {
	addr := serveShort(t, 2, 10*time.Second)
	var held []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	time.Sleep(100 * time.Millisecond) // both accepted
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	fmt.Fprintf(third, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _ := third.Read(make([]byte, 64)); n != 0 {
		t.Fatal("a third connection was served while two were held")
	}
	held[0].Close()
	third.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 64)
	if n, err := third.Read(b); err != nil || !strings.HasPrefix(string(b[:n]), "HTTP/1.1 200") {
		t.Fatalf("after one held connection went: %q, %v", b[:n], err)
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
