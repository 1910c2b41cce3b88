package actuator

import (
	"fmt"
	"net/netip"
)

func gidString(g [16]byte) string { return netip.AddrFrom16(g).String() }

// ParseGID reads a GID written as an IPv6 address (fe80::1, ::ffff:10.0.0.1).
func ParseGID(s string) ([16]byte, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return [16]byte{}, fmt.Errorf("bad gid %q: %w", s, err)
	}
	return a.As16(), nil
}
