// Package portaddr reads the addresses of a host's RDMA ports from sysfs
// (/sys/class/infiniband/DEV/ports/N/lid, lid_mask_count and gids/I): what a path of
// another host must lead to for the two to be one connection. Every name
// and value is bounded; a device or port that cannot be read is left out.
package portaddr

import (
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/apmwatch/apmwatch/event"
)

// Root is where the kernel lists RDMA devices.
const Root = "/sys/class/infiniband"

// maxGIDIndex bounds the GID table entries read per port (RoCE tables
// are long; the GIDs in use come first).
const maxGIDIndex = 32

// Read returns the addresses of every port under root (Root when empty),
// in device and port order, at most event.MaxPortAddrs ports and
// event.MaxPortGIDs non-zero GIDs each.
func Read(root string) []event.PortAddr {
	if root == "" {
		root = Root
	}
	devs, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var out []event.PortAddr
	for _, d := range devs {
		name := d.Name()
		if len(name) > 64 || strings.ContainsAny(name, "\x00/") {
			continue
		}
		ports, err := os.ReadDir(filepath.Join(root, name, "ports"))
		if err != nil {
			continue
		}
		var nums []uint32
		for _, p := range ports {
			if n, err := strconv.ParseUint(p.Name(), 10, 32); err == nil {
				nums = append(nums, uint32(n))
			}
		}
		sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
		for _, n := range nums {
			if len(out) >= event.MaxPortAddrs {
				return out
			}
			out = append(out, readPort(filepath.Join(root, name, "ports", strconv.FormatUint(uint64(n), 10)), name, n))
		}
	}
	return out
}

func readPort(dir, dev string, port uint32) event.PortAddr {
	a := event.PortAddr{Device: dev, Port: port, LID: LID(dir), LMC: LMC(dir)}
	for i := 0; i < maxGIDIndex && len(a.GIDs) < event.MaxPortGIDs; i++ {
		ip, ok, err := GID(dir, i)
		if err != nil {
			break
		}
		if ok {
			a.GIDs = append(a.GIDs, ip.As16())
		}
	}
	return a
}

// LID reads the LID of the port directory dir (0 when it has none or it
// cannot be read).
func LID(dir string) uint16 {
	b, err := readSmall(filepath.Join(dir, "lid"))
	if err != nil {
		return 0
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 16)
	if err != nil {
		return 0
	}
	return uint16(v)
}

// maxLMC is the largest LID mask count (IBTA: 3 bits).
const maxLMC = 7

// LMC reads the LID mask count of the port directory dir (0 when it has
// none, it cannot be read, or it is out of range).
func LMC(dir string) uint8 {
	b, err := readSmall(filepath.Join(dir, "lid_mask_count"))
	if err != nil {
		return 0
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 8)
	if err != nil || v > maxLMC {
		return 0
	}
	return uint8(v)
}

// GID reads entry i of the port directory dir's GID table: ok is false for
// an unused (zero) or unparsable entry, err set when there is no such entry.
func GID(dir string, i int) (netip.Addr, bool, error) {
	b, err := readSmall(filepath.Join(dir, "gids", strconv.Itoa(i)))
	if err != nil {
		return netip.Addr{}, false, err
	}
	ip, err := netip.ParseAddr(strings.TrimSpace(string(b)))
	if err != nil || !ip.Is6() || ip.IsUnspecified() {
		return netip.Addr{}, false, nil
	}
	return ip, true, nil
}

// BootID is the kernel's boot identity ("" when it cannot be read).
func BootID() string {
	b, err := readSmall("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// readSmall reads at most 256 bytes of a sysfs or proc attribute.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 256)
	n, err := f.Read(b)
	if n == 0 && err != nil {
		return nil, err
	}
	return b[:n], nil
}
