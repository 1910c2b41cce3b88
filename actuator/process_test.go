package actuator

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseStartTime(t *testing.T) {
	// A comm with spaces and parentheses (any process can set one).
	stat := "1234 (a) b (c) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10 18446744073709551615\n"
	if v, err := parseStartTime([]byte(stat)); err != nil || v != 98765 {
		t.Errorf("start time %d %v, want 98765", v, err)
	}
	for _, bad := range []string{"", "1 (x S 1 2", "1 (x) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 zz 1"} {
		if _, err := parseStartTime([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseCgroup(t *testing.T) {
	if g := parseCgroup([]byte("0::/system.slice/app.service\n")); g != "/system.slice/app.service" {
		t.Errorf("v2: %q", g)
	}
	v1 := "12:memory:/user.slice\n1:name=systemd:/system.slice/app.service\n"
	if g := parseCgroup([]byte(v1)); g != "/system.slice/app.service" {
		t.Errorf("v1: %q", g)
	}
}

// pin opens the pidfd first and refuses another process under the pid;
// same notices the process exited.
func TestPinAndSameProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	r := sysRoots
	p, err := r.pin(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	if err := r.same(p); err != nil {
		t.Fatalf("same process: %v", err)
	}
	if _, err := r.pin(pid, p.start+1); !errors.Is(err, ErrNoProcess) || !strings.Contains(err.Error(), "pid was reused") {
		t.Errorf("another start time: %v", err)
	}
	if q, err := r.pin(pid, p.start); err != nil {
		t.Errorf("the judged start time: %v", err)
	} else {
		q.close()
	}
	cmd.Process.Kill()
	cmd.Wait()
	if err := r.same(p); !errors.Is(err, ErrNoProcess) {
		t.Errorf("after exit: %v", err)
	}
	if _, err := r.pin(pid, 0); !errors.Is(err, ErrNoProcess) {
		t.Errorf("pin of a reaped pid: %v", err)
	}
}

// Our own /proc entries: uids and cgroup as the policy matches them, read
// only when the allowlist checks them; the start time always.
func TestFillOwnerSelf(t *testing.T) {
	bare := Owner{PID: uint32(os.Getpid())}
	if err := sysRoots.fillOwner(&bare, false, false); err != nil || bare.Start == 0 || bare.UIDs != nil || bare.Cgroup != "" {
		t.Errorf("start time only: %+v, %v", bare, err)
	}
	o := Owner{PID: uint32(os.Getpid())}
	if err := sysRoots.fillOwner(&o, true, true); err != nil {
		t.Fatal(err)
	}
	if o.Start != bare.Start {
		t.Errorf("start time %d, then %d", bare.Start, o.Start)
	}
	u := uint32(os.Getuid())
	if len(o.UIDs) != 3 || o.UIDs[0] != u || o.Start == 0 {
		t.Errorf("owner %+v", o)
	}
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil && parseCgroup(b) != o.Cgroup {
		t.Errorf("cgroup %q", o.Cgroup)
	}
}

// The borrowed fd must be the uverbs device of the QP's device before any
// ioctl reaches it.
func TestUverbsNodeChecked(t *testing.T) {
	d := t.TempDir()
	r := roots{proc: filepath.Join(d, "proc"), verbs: filepath.Join(d, "verbs"), devChar: filepath.Join(d, "dev", "char")}
	os.MkdirAll(filepath.Join(r.verbs, "uverbs0"), 0o755)
	os.MkdirAll(filepath.Join(r.verbs, "uverbs1"), 0o755)
	os.MkdirAll(r.devChar, 0o755)
	os.WriteFile(filepath.Join(r.verbs, "uverbs0", "ibdev"), []byte("rxe0\n"), 0o644)
	os.WriteFile(filepath.Join(r.verbs, "uverbs1", "ibdev"), []byte("rxe1\n"), 0o644)
	// As sysfs links them: a virtual device, one under its PCI parent, a
	// node of another class and one named like uverbs in another class.
	for num, target := range map[string]string{
		"231:0": "../../devices/virtual/infiniband_verbs/uverbs0",
		"231:1": "../../devices/pci0000:00/0000:00:03.0/infiniband_verbs/uverbs1",
		"1:3":   "../../devices/virtual/mem/null",
		"10:5":  "../../devices/virtual/misc/uverbs0",
	} {
		if err := os.Symlink(target, filepath.Join(r.devChar, num)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := r.uverbsNode(unix.S_IFCHR, unix.Mkdev(231, 1), "rxe1"); err != nil || n != "uverbs1" {
		t.Errorf("uverbs1 of rxe1: %q %v", n, err)
	}
	if n, err := r.uverbsNode(unix.S_IFCHR, unix.Mkdev(231, 0), "rxe0"); err != nil || n != "uverbs0" {
		t.Errorf("uverbs0 of rxe0: %q %v", n, err)
	}
	for name, tc := range map[string]struct {
		mode uint32
		rdev uint64
		dev  string
		want string
	}{
		"regular file":      {unix.S_IFREG, 0, "rxe0", "not a character device"},
		"fifo":              {unix.S_IFIFO, 0, "rxe0", "not a character device"},
		"other char dev":    {unix.S_IFCHR, unix.Mkdev(1, 3), "rxe0", "device 1:3, not a uverbs device"},
		"uverbs name, misc": {unix.S_IFCHR, unix.Mkdev(10, 5), "rxe0", "device 10:5, not a uverbs device"},
		"other device":      {unix.S_IFCHR, unix.Mkdev(231, 1), "rxe0", "uverbs1 of rxe1, not of rxe0"},
		"unknown minor":     {unix.S_IFCHR, unix.Mkdev(231, 9), "rxe0", "device 231:9, which sysfs does not list"},
	} {
		if _, err := r.uverbsNode(tc.mode, tc.rdev, tc.dev); !errors.Is(err, ErrNoFile) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	// A real fd: /dev/null is a character device, not uverbs'.
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := r.checkUverbs(int(f.Fd()), "rxe0"); !errors.Is(err, ErrNoFile) || !strings.Contains(err.Error(), "device 1:3, not a uverbs device") {
		t.Errorf("/dev/null: %v", err)
	}
}
