package natsserver

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// --monitor serves NATS's monitoring; a bare port listens on loopback.
func TestEmbeddedMonitorPort(t *testing.T) {
	for in, want := range map[string]string{"8222": "127.0.0.1:8222", ":8222": "127.0.0.1:8222", "0.0.0.0:8222": "0.0.0.0:8222", "[::1]:9": "::1:9"} {
		h, p, err := monitorAddr(in)
		if err != nil || fmt.Sprintf("%s:%d", h, p) != want {
			t.Errorf("--monitor %s: %s:%d %v, want %s", in, h, p, err, want)
		}
	}
	for _, bad := range []string{"x", "1:2:3", "99999", "host:"} {
		if _, _, err := monitorAddr(bad); err == nil {
			t.Errorf("--monitor %s accepted", bad)
		}
	}
	s, err := StartServer(ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Monitor: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	u := s.MonitorURL()
	if !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("monitor at %q, want loopback", u)
	}
	resp, err := http.Get(u + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	none, err := StartServer(ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Shutdown()
	if none.MonitorURL() != "" {
		t.Fatalf("a monitor without --monitor: %s", none.MonitorURL())
	}
}
