package hcacheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CheckDeviceName rejects a --dev value that cannot name an RDMA device
// (a usage error: the caller exits 2).
func CheckDeviceName(dev string) error {
	switch {
	case dev == "":
		return errors.New("--dev is required")
	case len(dev) > 64, strings.ContainsAny(dev, "/\x00"), dev == ".", dev == "..":
		return fmt.Errorf("bad --dev %q: not an RDMA device name", dev)
	}
	return nil
}

// portInfo is what sysfs says of one port.
type portInfo struct {
	LID uint16
	LMC uint8
}

// deviceInfo is what sysfs says of the device.
type deviceInfo struct {
	Driver string // the kernel driver's name, "" when the device has no parent (software devices)
	Ports  map[uint8]portInfo
}

// providerDrivers are drivers whose create_cq/create_qp read
// provider-specific data (the userspace provider's queue buffers,
// doorbells) from the command: the raw uverbs backend cannot make QPs on
// them. rdmavt's drivers (hfi1, qib) and ibsim need none.
var providerDrivers = []string{
	"mlx5", "mlx4", "mthca", "cxgb4", "bnxt", "efa", "irdma", "i40iw", "qedr", "qede",
	"hns", "ocrdma", "be2net", "vmw_pvrdma", "erdma", "mana", "usnic", "enic", "ionic",
}

// inspect checks the device and its ports in sysfs: present, InfiniBand
// link layer, ACTIVE with a LID, and a driver the raw backend can drive.
func inspect(sys, dev string, ports ...uint8) (deviceInfo, error) {
	base := filepath.Join(sys, "class", "infiniband", dev)
	if _, err := os.Stat(base); err != nil {
		return deviceInfo{}, fmt.Errorf("no RDMA device named %s (see %s)", dev, filepath.Dir(base))
	}
	info := deviceInfo{Ports: map[uint8]portInfo{}}
	for _, p := range ports {
		pdir := filepath.Join(base, "ports", strconv.Itoa(int(p)))
		if _, err := os.Stat(pdir); err != nil {
			return info, fmt.Errorf("%s has no port %d", dev, p)
		}
		ll := readTrim(filepath.Join(pdir, "link_layer"))
		if ll != "InfiniBand" {
			if ll == "" {
				ll = "unknown"
			}
			return info, fmt.Errorf("%s port %d has link layer %s, not InfiniBand: path migration needs InfiniBand ports (RoCE and iWARP devices are refused)", dev, p, ll)
		}
	}
	if l, err := os.Readlink(filepath.Join(base, "device", "driver")); err == nil {
		info.Driver = filepath.Base(l)
	}
	if d := needsProvider(info.Driver, dev); d != "" {
		return info, fmt.Errorf("%s is driven by %s, whose create_qp needs its userspace provider's queue buffers: only a libibverbs backend can make QPs on it, and this apmwatch has only the raw uverbs one", dev, d)
	}
	for _, p := range ports {
		pdir := filepath.Join(base, "ports", strconv.Itoa(int(p)))
		if st := readTrim(filepath.Join(pdir, "state")); !strings.Contains(st, "ACTIVE") {
			return info, fmt.Errorf("%s port %d is not ACTIVE (state %q)", dev, p, st)
		}
		lid, err := strconv.ParseUint(strings.TrimPrefix(readTrim(filepath.Join(pdir, "lid")), "0x"), 16, 16)
		if err != nil || lid == 0 || lid >= 0xc000 {
			return info, fmt.Errorf("%s port %d has no unicast LID (is a subnet manager running?)", dev, p)
		}
		lmc, _ := strconv.ParseUint(readTrim(filepath.Join(pdir, "lid_mask_count")), 10, 8)
		info.Ports[p] = portInfo{LID: uint16(lid), LMC: uint8(lmc)}
	}
	return info, nil
}

// needsProvider names the driver (or the device's name prefix) when it is
// one of providerDrivers, else "".
func needsProvider(driver, dev string) string {
	for _, p := range providerDrivers {
		if strings.HasPrefix(strings.TrimPrefix(driver, "ib_"), p) {
			return driver
		}
	}
	if driver == "" {
		for _, p := range providerDrivers {
			if strings.HasPrefix(dev, p) {
				return p
			}
		}
	}
	return ""
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
