//go:build labguest

package guest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// hideModuleBTF leaves only vmlinux's BTF in /sys/kernel/btf (a tmpfs over
// it, as on a host whose RDMA modules carry none: MLNX_OFED, RHEL 8) until
// the test ends.
func hideModuleBTF(t *testing.T) {
	t.Helper()
	vmlinux, err := os.ReadFile("/sys/kernel/btf/vmlinux")
	if err != nil {
		t.Fatalf("reading vmlinux BTF: %v", err)
	}
	if err := unix.Mount("tmpfs", "/sys/kernel/btf", "tmpfs", 0, "mode=0755"); err != nil {
		t.Fatalf("mounting a tmpfs over /sys/kernel/btf: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount("/sys/kernel/btf", 0); err != nil {
			t.Errorf("unmounting the tmpfs over /sys/kernel/btf: %v", err)
		}
	})
	if err := os.WriteFile("/sys/kernel/btf/vmlinux", vmlinux, 0o444); err != nil {
		t.Fatalf("writing vmlinux BTF: %v", err)
	}
}

// With the RDMA modules' BTF hidden the probes on them cannot load: trace
// and record exit non-zero naming each blind signal's hooks and why, and
// audit runs on what it sees with apmwatch_probes_up 0 and the failed hooks
// in apmwatch_hook_attached.
func TestBlindIsError(t *testing.T) {
	hideModuleBTF(t)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"trace", "-o", "json", "--duration", "2s"},
		{"record", "-w", filepath.Join(dir, "blind.rec"), "--duration", "2s"},
	} {
		r := Run(t, "apmwatch", args...)
		if r.Code == 0 || !strings.Contains(r.Stderr, "blind: no probe attached for") ||
			!strings.Contains(r.Stderr, "ib_modify_qp_with_udata") || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
			t.Errorf("apmwatch %s with the module BTF hidden: exit %d, stderr %q: want non-zero and one line naming the blind hooks", args[0], r.Code, r.Stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "blind.rec")); err == nil {
		t.Error("record wrote a recording from blind probes")
	}
	p := startAudit(t, dir)
	page := scrape(t)
	for _, want := range []string{"apmwatch_probes_up 0", `apmwatch_hook_attached{carries="qp modify, user QPs",failed="true",hook="ib_modify_qp_with_udata",module="ib_core"} 0`} {
		if !strings.Contains(page, want) {
			t.Errorf("audit's metrics lack %q", want)
		}
	}
	p.Stop(t)
	if !strings.Contains(p.Stderr(), "probes attached blind") {
		t.Errorf("audit's log does not say it is blind:\n%s", p.Stderr())
	}
}
