package actuator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apmwatch/apmwatch/rdmanl"
	"golang.org/x/sys/unix"
)

// Owner is a QP's owner: the process rdma netlink names, with what /proc
// says of it. Comm is whatever the process set (any process can set any
// name) and a pid can be reused; uid, cgroup and start time are harder to
// fake.
type Owner struct {
	PID    uint32
	Comm   string
	Kernel bool
	// UIDs are the real, effective and saved uids (/proc/PID/status).
	UIDs []uint32
	// Cgroup is the process's cgroup path (the unified hierarchy's, else
	// the systemd one's), for example
	// /system.slice/myapp.service or /kubepods.slice/.../kubepods-pod<uid>.slice/cri-containerd-<id>.scope.
	Cgroup string
	// Start is the process's start time (/proc/PID/stat field 22, clock
	// ticks after boot): with the pid, it names one process.
	Start uint64
	// Row is the rdma netlink row the owner was read from (LQPN 0: none).
	Row rdmanl.QP
}

// id names the owner for the per-owner rate limit.
func (o Owner) id() string { return fmt.Sprintf("%d@%d", o.PID, o.Start) }

// netlinkOwner reads the owner from the actuator's netlink rows and /proc:
// the start time always, the uids and cgroup only when the allowlist
// (read at each call) checks them.
func (r roots) netlinkOwner(a *Actuator, allow func() Allow) func(string, uint32) (Owner, error) {
	return func(device string, qpn uint32) (Owner, error) {
		rows, err := a.find(device, qpn)
		if err != nil {
			return Owner{}, fmt.Errorf("reading rdma netlink: %w", err)
		}
		for _, row := range rows {
			if row.Device == device && row.LQPN == qpn {
				o := Owner{PID: row.PID, Comm: row.Comm, Kernel: row.Kernel, Row: row}
				if o.Kernel {
					return o, nil
				}
				al := allow()
				return o, r.fillOwner(&o, len(al.UIDs) > 0, len(al.Cgroups)+len(al.Units)+len(al.Pods) > 0)
			}
		}
		return Owner{}, fmt.Errorf("%w: no qp %d on %s in rdma netlink", ErrNotFound, qpn, device)
	}
}

// fillOwner reads the start time of o.PID (first: it pins the process),
// then, when asked, its uids and cgroup, and checks that the start time
// did not change meanwhile.
func (r roots) fillOwner(o *Owner, uids, cgroup bool) error {
	pid := int(o.PID)
	start, err := r.startTime(pid)
	if err != nil {
		return err
	}
	if uids {
		if o.UIDs, err = r.uids(pid); err != nil {
			return err
		}
	}
	if cgroup {
		if o.Cgroup, err = r.cgroup(pid); err != nil {
			return err
		}
	}
	if uids || cgroup {
		if again, err := r.startTime(pid); err != nil || again != start {
			return fmt.Errorf("%w: process %d changed while it was read (pid reused)", ErrNoProcess, pid)
		}
	}
	o.Start = start
	return nil
}

// maxProcFile bounds what is read of one /proc file.
const maxProcFile = 64 << 10

func (r roots) procFile(pid int, name string) ([]byte, error) {
	f, err := os.Open(filepath.Join(r.proc, strconv.Itoa(pid), name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: process %d", ErrNoProcess, pid)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxProcFile))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("%w: process %d", ErrNoProcess, pid)
	}
	return b, err
}

// startTime reads field 22 of /proc/PID/stat. The comm (field 2) may hold
// spaces and parentheses: the fields after it start after the last ')'.
func (r roots) startTime(pid int) (uint64, error) {
	b, err := r.procFile(pid, "stat")
	if err != nil {
		return 0, err
	}
	return parseStartTime(b)
}

func parseStartTime(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat: no comm")
	}
	f := strings.Fields(string(b[i+1:]))
	const field = 22 - 3 // fields after comm start with field 3 (state)
	if len(f) <= field {
		return 0, fmt.Errorf("malformed /proc stat: %d fields", len(f)+2)
	}
	v, err := strconv.ParseUint(f[field], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed /proc stat start time: %w", err)
	}
	return v, nil
}

// uids reads the real, effective and saved uids from /proc/PID/status.
func (r roots) uids(pid int) ([]uint32, error) {
	b, err := r.procFile(pid, "status")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[0] != "Uid:" {
			continue
		}
		var out []uint32
		for _, s := range f[1:4] {
			v, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("malformed /proc status uid %q", s)
			}
			out = append(out, uint32(v))
		}
		return out, nil
	}
	return nil, errors.New("malformed /proc status: no Uid line")
}

// cgroup reads the process's cgroup path from /proc/PID/cgroup: the
// unified hierarchy's line (0::PATH), else the systemd hierarchy's.
func (r roots) cgroup(pid int) (string, error) {
	b, err := r.procFile(pid, "cgroup")
	if err != nil {
		return "", err
	}
	return parseCgroup(b), nil
}

func parseCgroup(b []byte) string {
	var systemd string
	for _, l := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			return parts[2]
		case parts[1] == "name=systemd" && systemd == "":
			systemd = parts[2]
		}
	}
	return systemd
}
