package actuator

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Error classes. Every error the actuator returns wraps one of these (test
// with errors.Is) and reads as one lowercase line.
var (
	ErrPermission = errors.New("no permission")
	ErrNoProcess  = errors.New("no such process")
	ErrNoFile     = errors.New("owner has no uverbs file")
	ErrGone       = errors.New("qp gone")
	ErrNotFound   = errors.New("qp not found")
	ErrAmbiguous  = errors.New("ambiguous handle")
	ErrWrongState = errors.New("wrong state")
	ErrKernelQP   = errors.New("kernel qp")
	ErrRoCE       = errors.New("alternate path refused on a roce port: APM is InfiniBand-only")
	ErrRefused    = errors.New("refused by the kernel")
	// ErrBadAlt: the alternate cannot work on its port (path bits outside
	// the 7-bit field or the port's LMC): refused before anything is sent.
	ErrBadAlt = errors.New("alternate path refused")
)

// yamaScope reads the Yama ptrace_scope ("" without Yama).
var yamaScope = func() string {
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// permissionError explains a refused pidfd_getfd (or /proc/PID/fd read):
// the kernel's rule is ptrace_may_access(owner, PTRACE_MODE_ATTACH_REALCREDS).
func permissionError(pid int, what string, err error) error {
	var why []string
	if c, ok := hasCapSysPtrace(); ok && !c {
		why = append(why, "this process lacks CAP_SYS_PTRACE")
	}
	if uid, ok := ownerUID(pid); ok && uid != os.Getuid() {
		why = append(why, fmt.Sprintf("owner uid %d is not ours (%d)", uid, os.Getuid()))
	}
	switch yamaScope() {
	case "1":
		why = append(why, "yama ptrace_scope=1 allows only descendants without CAP_SYS_PTRACE")
	case "2":
		why = append(why, "yama ptrace_scope=2 needs CAP_SYS_PTRACE")
	case "3":
		why = append(why, "yama ptrace_scope=3 forbids it")
	}
	rule := "borrowing the owner's file needs ptrace access: CAP_SYS_PTRACE, or the same uid with no more capabilities than ours"
	msg := fmt.Sprintf("%s of process %d: %v", what, pid, err)
	if len(why) > 0 {
		msg += " (" + strings.Join(why, "; ") + ")"
	}
	return fmt.Errorf("%w: %s; %s", ErrPermission, msg, rule)
}

// hasCapSysPtrace reports whether CAP_SYS_PTRACE is in our effective set.
func hasCapSysPtrace() (has, ok bool) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, false
	}
	return data[0].Effective&(1<<unix.CAP_SYS_PTRACE) != 0, true
}

// ownerUID reads the real uid of a process from /proc/PID/status.
func ownerUID(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "Uid:" {
			var uid int
			if _, err := fmt.Sscan(f[1], &uid); err == nil {
				return uid, true
			}
		}
	}
	return 0, false
}
