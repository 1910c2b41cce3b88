package actuator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Roots of the files the actuator reads (tests point them at fixtures).
type roots struct {
	proc    string // /proc
	verbs   string // /sys/class/infiniband_verbs
	ib      string // /sys/class/infiniband
	devChar string // /sys/dev/char
}

var sysRoots = roots{proc: "/proc", verbs: "/sys/class/infiniband_verbs", ib: "/sys/class/infiniband", devChar: "/sys/dev/char"}

// OwnerFile is one of the owner's open uverbs files.
type OwnerFile struct {
	FD     int    `json:"fd"`     // the fd number in the owner
	Uverbs string `json:"uverbs"` // uverbs0
	Device string `json:"device"` // rxe0 (from /sys/class/infiniband_verbs/uverbsN/ibdev)
}

// ownerFiles lists the owner's fds open on /dev/infiniband/uverbsN, for one
// device ("" for all).
func (r roots) ownerFiles(pid int, device string) ([]OwnerFile, error) {
	dir := filepath.Join(r.proc, strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []OwnerFile
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrPermission) {
			return nil, err // ptrace read access refused: the caller explains
		}
		if err != nil || !strings.HasPrefix(target, "/dev/infiniband/uverbs") {
			continue
		}
		uv := strings.TrimPrefix(target, "/dev/infiniband/")
		dev, err := os.ReadFile(filepath.Join(r.verbs, uv, "ibdev"))
		if err != nil {
			return nil, fmt.Errorf("reading the device of %s: %w", uv, err)
		}
		f := OwnerFile{FD: fd, Uverbs: uv, Device: strings.TrimSpace(string(dev))}
		if device == "" || f.Device == device {
			out = append(out, f)
		}
	}
	return out, nil
}

// linkLayer reads /sys/class/infiniband/DEV/ports/N/link_layer
// ("InfiniBand" or "Ethernet"); "" when unknown.
func (r roots) linkLayer(device string, port uint8) string {
	b, err := os.ReadFile(filepath.Join(r.ib, device, "ports", strconv.Itoa(int(port)), "link_layer"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// portState reads /sys/class/infiniband/DEV/ports/N/state ("4: ACTIVE").
func (r roots) portState(device string, port uint8) string {
	b, err := os.ReadFile(filepath.Join(r.ib, device, "ports", strconv.Itoa(int(port)), "state"))
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if i := strings.Index(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// driverGuess names the device's kernel driver from its sysfs node
// (device/driver for PCI devices; the name prefix for software devices).
func (r roots) driverGuess(device string) uint32 {
	if l, err := os.Readlink(filepath.Join(r.ib, device, "device", "driver")); err == nil {
		name := filepath.Base(l)
		for k, id := range driverIDs {
			if strings.HasPrefix(name, k) {
				return id
			}
		}
	}
	for k, id := range driverIDs {
		if strings.HasPrefix(device, k) {
			return id
		}
	}
	return 0
}

// Borrowed is a duplicate of the owner's uverbs file, usable by this
// process through ioctl.
type Borrowed struct {
	PID      int
	File     OwnerFile
	FD       int // our fd
	DriverID uint32
	io       ioctler
}

// Close drops the duplicate; the owner's file is untouched.
func (b *Borrowed) Close() error {
	if b.FD < 0 {
		return nil
	}
	err := unix.Close(b.FD)
	b.FD = -1
	return err
}

// borrow duplicates one of the owner's fds through its pidfd
// (pidfd_getfd, kernel/pid.c: needs PTRACE_MODE_ATTACH_REALCREDS on the
// owner), checks it is the uverbs device it should be (checkUverbs) and
// finds the device's driver id.
func (r roots) borrow(p *process, f OwnerFile) (*Borrowed, error) {
	pid := p.pid
	fd, err := unix.PidfdGetfd(p.pfd, f.FD, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, permissionError(pid, "pidfd_getfd", err)
		}
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("%w: process %d", ErrNoProcess, pid)
		}
		return nil, fmt.Errorf("pidfd_getfd %d fd %d: %w", pid, f.FD, err)
	}
	node, err := r.checkUverbs(fd, f.Device)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fd %d of process %d: %w", f.FD, pid, err)
	}
	f.Uverbs = node
	id, err := probeDriverID(fd, r.driverGuess(f.Device))
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s of process %d: %w", f.Uverbs, pid, err)
	}
	return &Borrowed{PID: pid, File: f, FD: fd, DriverID: id, io: &fdIoctl{fd: fd, driverID: id}}, nil
}

// Query runs QUERY_QP on one of the owner's QP handles.
func (b *Borrowed) Query(handle uint32) (Attr, error) { return queryQP(b.io, handle) }

// Modify runs MODIFY_QP on one of the owner's QP handles.
func (b *Borrowed) Modify(m *Modify) error { return modifyQP(b.io, m) }

// Handles lists the owner's QP handles on this file.
func (b *Borrowed) Handles() ([]uint32, error) { return listHandles(b.io, 4096) }
