package metricsrv

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

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
