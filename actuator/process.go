package actuator

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// uverbsMajors reads the character-device majors of "infiniband_verbs"
// from /proc/devices (a fixed one, 231, and one allocated for more devices).
func (r roots) uverbsMajors() (map[uint32]bool, error) {
	b, err := os.ReadFile(filepath.Join(r.proc, "devices"))
	if err != nil {
		return nil, fmt.Errorf("reading the device majors: %w", err)
	}
	return parseMajors(b, "infiniband_verbs"), nil
}

// parseMajors returns the majors of name in the "Character devices:"
// section of /proc/devices.
func parseMajors(b []byte, name string) map[uint32]bool {
	out := map[uint32]bool{}
	char := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "Character devices:":
			char = true
		case strings.HasSuffix(l, "devices:"):
			char = false
		case char:
			f := strings.Fields(l)
			if len(f) == 2 && f[1] == name {
				if v, err := strconv.ParseUint(f[0], 10, 32); err == nil {
					out[uint32(v)] = true
				}
			}
		}
	}
	return out
}

// checkUverbs proves that fd (borrowed, not yet used) is a uverbs device of
// the expected RDMA device before any ioctl reaches it: fstat says a
// character device with uverbs' major, and the sysfs uverbs node with that
// device number belongs to device. The owner's path for it (its own mount
// namespace) is not trusted. It returns the node's name (uverbs0).
func (r roots) checkUverbs(fd int, device string) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("fstat of the borrowed file: %w", err)
	}
	majors, err := r.uverbsMajors()
	if err != nil {
		return "", err
	}
	return r.uverbsNode(st.Mode, uint64(st.Rdev), majors, device)
}

func (r roots) uverbsNode(mode uint32, rdev uint64, majors map[uint32]bool, device string) (string, error) {
	if mode&unix.S_IFMT != unix.S_IFCHR {
		return "", fmt.Errorf("%w: the borrowed file is not a character device (mode %#o): not touching it", ErrNoFile, mode&unix.S_IFMT)
	}
	maj, min := unix.Major(rdev), unix.Minor(rdev)
	if !majors[maj] {
		return "", fmt.Errorf("%w: the borrowed file is device %d:%d, not a uverbs device: not touching it", ErrNoFile, maj, min)
	}
	want := fmt.Sprintf("%d:%d", maj, min)
	ents, err := os.ReadDir(r.verbs)
	if err != nil {
		return "", fmt.Errorf("listing uverbs devices: %w", err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(r.verbs, e.Name(), "dev"))
		if err != nil || strings.TrimSpace(string(b)) != want {
			continue
		}
		dev, err := os.ReadFile(filepath.Join(r.verbs, e.Name(), "ibdev"))
		if err != nil {
			return "", fmt.Errorf("reading the device of %s: %w", e.Name(), err)
		}
		if got := strings.TrimSpace(string(dev)); got != device {
			return "", fmt.Errorf("%w: the borrowed file is %s of %s, not of %s: not touching it", ErrNoFile, e.Name(), got, device)
		}
		return e.Name(), nil
	}
	return "", fmt.Errorf("%w: no uverbs device %s in %s", ErrNoFile, want, r.verbs)
}
