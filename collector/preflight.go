package collector

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Capability numbers (linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// ErrNoPrivilege and ErrNoRDMA are the two things a live trace needs.
var (
	ErrNoPrivilege = errors.New("need root, or CAP_BPF and CAP_PERFMON, to load probes")
	ErrNoRDMA      = errors.New("ib_core is not loaded: this host has no RDMA stack (modprobe ib_core)")
)

// Preflight checks privileges and the RDMA core, returning one of the
// errors above.
func Preflight() error {
	if !privileged() {
		return ErrNoPrivilege
	}
	return CheckRDMA()
}

// CheckRDMA returns ErrNoRDMA when ib_core is not loaded.
func CheckRDMA() error {
	if _, err := os.Stat("/sys/module/ib_core"); err != nil {
		return ErrNoRDMA
	}
	return nil
}

func privileged() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return os.Geteuid() == 0
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	return has(capSysAdmin) || (has(capBPF) && has(capPerfmon))
}
