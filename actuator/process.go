package actuator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// process is the owner pinned by a pidfd. A pidfd names one process for
// its whole life while /proc/PID names whoever holds the pid now; the start
// time read after pidfd_open ties the two, and checking it again after the
// borrow proves the file came from the process that was judged.
type process struct {
	pid   int
	pfd   int
	start uint64
}

// pin opens the pidfd first, then reads the start time. want, when not 0,
// is the start time of the process that was judged: another one with the
// same pid is refused.
func (r roots) pin(pid int, want uint64) (*process, error) {
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("%w: process %d", ErrNoProcess, pid)
		}
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	start, err := r.startTime(pid)
	if err != nil {
		unix.Close(pfd)
		return nil, err
	}
	if want != 0 && start != want {
		unix.Close(pfd)
		return nil, fmt.Errorf("%w: process %d is not the one judged (started at tick %d, not %d): its pid was reused", ErrNoProcess, pid, start, want)
	}
	return &process{pid: pid, pfd: pfd, start: start}, nil
}

func (p *process) close() { unix.Close(p.pfd) }

// same checks that the pid still names the pinned process: the pidfd does
// not poll readable (it does once the process exits) and /proc/PID has the
// same start time.
func (r roots) same(p *process) error {
	fds := []unix.PollFd{{Fd: int32(p.pfd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 0); err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0 {
		return fmt.Errorf("%w: process %d exited while its file was borrowed", ErrNoProcess, p.pid)
	}
	start, err := r.startTime(p.pid)
	if err != nil {
		return err
	}
	if start != p.start {
		return fmt.Errorf("%w: process %d changed while its file was borrowed (pid reused)", ErrNoProcess, p.pid)
	}
	return nil
}

// checkUverbs proves that fd (borrowed, not yet used) is a uverbs device of
// the expected RDMA device before any ioctl reaches it: fstat says a
// character device, the kernel's link for that device number
// (/sys/dev/char/MAJ:MIN) leads to a node of the infiniband_verbs class, and
// that node belongs to device. The owner's path for it (its own mount
// namespace) is not trusted. It returns the node's name (uverbs0).
func (r roots) checkUverbs(fd int, device string) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("fstat of the borrowed file: %w", err)
	}
	return r.uverbsNode(st.Mode, uint64(st.Rdev), device)
}

// uverbsNode names the uverbs node of a character device number, checking
// it belongs to device. The sysfs link of a uverbs node ends in
// infiniband_verbs/uverbsN (under its parent's directory, or under
// devices/virtual for a device without one).
func (r roots) uverbsNode(mode uint32, rdev uint64, device string) (string, error) {
	if mode&unix.S_IFMT != unix.S_IFCHR {
		return "", fmt.Errorf("%w: the borrowed file is not a character device (mode %#o): not touching it", ErrNoFile, mode&unix.S_IFMT)
	}
	maj, min := unix.Major(rdev), unix.Minor(rdev)
	link, err := os.Readlink(filepath.Join(r.devChar, fmt.Sprintf("%d:%d", maj, min)))
	if err != nil {
		return "", fmt.Errorf("%w: the borrowed file is device %d:%d, which sysfs does not list (%v): not touching it", ErrNoFile, maj, min, err)
	}
	node := filepath.Base(link)
	if filepath.Base(filepath.Dir(link)) != "infiniband_verbs" || !strings.HasPrefix(node, "uverbs") {
		return "", fmt.Errorf("%w: the borrowed file is device %d:%d, not a uverbs device: not touching it", ErrNoFile, maj, min)
	}
	dev, err := os.ReadFile(filepath.Join(r.verbs, node, "ibdev"))
	if err != nil {
		return "", fmt.Errorf("reading the device of %s: %w", node, err)
	}
	if got := strings.TrimSpace(string(dev)); got != device {
		return "", fmt.Errorf("%w: the borrowed file is %s of %s, not of %s: not touching it", ErrNoFile, node, got, device)
	}
	return node, nil
}
