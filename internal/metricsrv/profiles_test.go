package metricsrv

import "testing"

// Profiles show the daemon's memory: only on a loopback metrics address.
func TestCheckProfilesAddrAllowsOnlyLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:9579": true, "[::1]:9579": true, "localhost:9579": true,
		"0.0.0.0:9579": false, "10.0.0.1:9579": false, ":9579": false, "": false, "fleet:9579": false,
	} {
		if err := CheckProfilesAddr(addr); (err == nil) != ok {
			t.Errorf("CheckProfilesAddr(%q) = %v, want allowed %v", addr, err, ok)
		}
	}
}
