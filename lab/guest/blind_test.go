//go:build labguest

package guest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/modid"
	"golang.org/x/sys/unix"
)

// externalBTF is apmwatch's default external BTF directory: the 5.10 image
// carries there what apmwatch btf gen made from the modules' debug info
// when the image was built.
const externalBTF = "/var/lib/apmwatch/btf"

// hideModuleBTF leaves only vmlinux's BTF in /sys/kernel/btf (a tmpfs over
// it, as on a host whose RDMA modules carry none: MLNX_OFED, RHEL 8) and
// hides externalBTF the same way, until the test ends. It returns a copy of
// the files externalBTF held for this kernel, "" when it held none.
func hideModuleBTF(t *testing.T) (prepared string) {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	// Each MODULE.btf with the identity of its build (MODULE.btf.id).
	if files, _ := filepath.Glob(filepath.Join(externalBTF, unix.ByteSliceToString(u.Release[:]), "*.btf*")); len(files) > 0 {
		prepared = filepath.Join(t.TempDir(), "prepared-btf")
		if err := os.MkdirAll(prepared, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err == nil {
				err = os.WriteFile(filepath.Join(prepared, filepath.Base(f)), b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := unix.Mount("tmpfs", externalBTF, "tmpfs", 0, "mode=0755"); err != nil {
			t.Fatalf("mounting a tmpfs over %s: %v", externalBTF, err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(externalBTF, 0); err != nil {
				t.Errorf("unmounting the tmpfs over %s: %v", externalBTF, err)
			}
		})
	}
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
	return prepared
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

// With the modules' BTF hidden, `apmwatch btf gen` writes it back as files
// from what the host has (the module files' own .BTF sections), and with
// them (--btf DIR, or the default /var/lib/apmwatch/btf/$(uname -r)) the
// probes attach with kprobes and raw tracepoints and see: a never-rearm
// pair through a port failure gives missed-rearm on both ends, traced on
// the files `btf gen --min` writes (the whole ones in the default
// directory load every hook). Where the modules carry no BTF at all (5.10)
// and the guest has no debug info, btf gen says each module is missing and
// exits 1; the files it made from the -dbg package's debug info when the
// image was built serve instead.
func TestBTFDirSeesWithoutModuleBTF(t *testing.T) {
	_, statErr := os.Stat("/sys/kernel/btf/ib_core")
	ownBTF := statErr == nil
	prepared := hideModuleBTF(t)
	dir := filepath.Join(t.TempDir(), "btf")
	out, err := exec.Command("apmwatch", "btf", "gen", "--dir", dir).CombinedOutput()
	switch {
	case ownBTF && err != nil:
		t.Fatalf("apmwatch btf gen: %v\n%s", err, out)
	case ownBTF:
		t.Logf("apmwatch btf gen:\n%s", out)
	default:
		t.Logf("apmwatch btf gen (modules without BTF, no debug info here):\n%s", out)
		for _, m := range []string{"ib_core", "ib_uverbs", "ib_cm"} {
			if !strings.Contains(string(out), m+": missing: ") {
				t.Errorf("btf gen does not say %s is missing", m)
			}
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("btf gen without debug info: %v, want exit status 1", err)
		}
		if prepared == "" {
			t.Fatalf("the modules carry no BTF and the image has none in %s", externalBTF)
		}
		dir = prepared
	}
	for _, m := range []string{"ib_core", "ib_uverbs", "ib_cm"} {
		if _, err := os.Stat(filepath.Join(dir, m+".btf")); err != nil {
			t.Errorf("btf gen wrote no %s.btf: %v", m, err)
		}
		// Beside each, the build it was made from: the loaded module's
		// (its build-id note in /sys/module/M/notes).
		rec, err := modid.ReadSidecar(filepath.Join(dir, m+".btf"))
		loaded, ok, lerr := modid.Loaded("/sys/module", m)
		if err != nil || lerr != nil || !ok || loaded.BuildID == "" || modid.Match(rec, loaded) != nil {
			t.Errorf("%s.btf's identity %+v (%v) against the loaded module's %+v (%v, loaded %v)", m, rec, err, loaded, lerr, ok)
		}
	}
	checkStaleBTFRefused(t, dir)
	// --min keeps only what the probes read: files of a few KiB that trace
	// a migration and judge it (the whole files serve the default
	// directory below); where the modules carry no BTF the prepared files
	// serve the trace too
	scenarioDir := dir
	if ownBTF {
		minDir := filepath.Join(t.TempDir(), "btf-min")
		out, err := exec.Command("apmwatch", "btf", "gen", "--min", "--dir", minDir).CombinedOutput()
		if err != nil {
			t.Fatalf("apmwatch btf gen --min: %v\n%s", err, out)
		}
		t.Logf("apmwatch btf gen --min:\n%s", out)
		if !strings.Contains(string(out), "minimized to") {
			t.Errorf("btf gen --min does not say it minimized:\n%s", out)
		}
		for _, m := range []string{"ib_core", "ib_uverbs", "ib_cm"} {
			st, err := os.Stat(filepath.Join(minDir, m+".btf"))
			if err != nil {
				t.Errorf("btf gen --min wrote no %s.btf: %v", m, err)
			} else if st.Size() > 16<<10 {
				t.Errorf("%s.btf minimized is %d bytes: more than the probes read", m, st.Size())
			}
		}
		scenarioDir = minDir
	}
	tr, p, q0, q1 := ibPairScenario(t, "never-rearm", "--btf", scenarioDir)
	portDown(t, p, 1, false, q0, q1)
	time.Sleep(settle)
	wantSet(t, tr, ibFindings(t, tr), both("missed-rearm", q0, q1)...)
	p.Stop(t)
	if !strings.Contains(tr.Stderr(), "kprobe") {
		t.Errorf("the summary does not show kprobes:\n%s", tr.Stderr())
	}

	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	def := filepath.Join("/var/lib/apmwatch/btf", unix.ByteSliceToString(u.Release[:]))
	if err := os.MkdirAll(def, 0o755); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.btf*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			err = os.WriteFile(filepath.Join(def, filepath.Base(f)), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll("/var/lib/apmwatch/btf") })
	out, err = exec.Command("apmwatch", "probes", "-o", "json").Output()
	var hooks []event.Hook
	if err == nil {
		err = json.Unmarshal(out, &hooks)
	}
	if err != nil {
		t.Fatalf("apmwatch probes -o json: %v\n%s", err, out)
	}
	if !slices.ContainsFunc(hooks, func(h event.Hook) bool { return strings.Contains(h.Reason, "types from external btf") }) {
		t.Errorf("apmwatch probes with the default btf directory: no hook takes its types from it: %+v", hooks)
	}
	if r := Run(t, "apmwatch", "trace", "-o", "json", "--duration", "1s"); r.Code != 0 {
		t.Errorf("trace with the default btf directory: exit %d: %s", r.Code, r.Stderr)
	}
}

// checkStaleBTFRefused: the same files, one recorded as another build of
// ib_core (a file left from before an OFED upgrade), are refused with one
// line naming both builds; nothing attaches with the wrong layout.
func checkStaleBTFRefused(t *testing.T, dir string) {
	t.Helper()
	stale := filepath.Join(t.TempDir(), "stale")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.btf*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			err = os.WriteFile(filepath.Join(stale, filepath.Base(f)), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	id := modid.ID{Module: "ib_core", BuildID: "00112233445566778899aabbccddeeff00112233", Source: "/lib/modules/old/ib_core.ko"}
	if err := os.WriteFile(modid.SidecarPath(filepath.Join(stale, "ib_core.btf")), id.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	r := Run(t, "apmwatch", "probes", "--btf", stale)
	loaded, _, _ := modid.Loaded("/sys/module", "ib_core")
	if r.Code == 0 || !strings.Contains(r.Stderr, "is not the loaded module's") || !strings.Contains(r.Stderr, id.BuildID) ||
		!strings.Contains(r.Stderr, loaded.BuildID) {
		t.Errorf("apmwatch probes with a stale ib_core.btf: exit %d, stderr %q; want a refusal naming both builds", r.Code, r.Stderr)
	}
}
