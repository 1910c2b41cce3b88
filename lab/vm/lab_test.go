package vm

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests in this file boot the lab: they need root, the host set up by
// lab/setup-host.sh and the initramfs of both kernels, so they run only with
// APMWATCH_LAB=1, as `make lab-host-test` (part of `make test`) sets it.

func needLab(t *testing.T) string {
	t.Helper()
	if os.Getenv("APMWATCH_LAB") != "1" {
		t.Skip("lab test: needs root and the lab; run `make lab-host-test` (sets APMWATCH_LAB=1)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("APMWATCH_LAB=1 but not root")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// makeLabRun runs `make lab-run` in the source tree and returns stdout,
// stderr and make's exit code.
func makeLabRun(t *testing.T, repo string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", repo, "lab-run"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func labvm(repo string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(buildDir(repo), "lab", "labvm"), args...)
	cmd.Dir = repo
	return cmd
}

func buildDir(repo string) string {
	if b := os.Getenv("BUILD"); b != "" {
		return b
	}
	return filepath.Join(repo, "build")
}

func TestLabExitStatus(t *testing.T) {
	repo := needLab(t)
	// The runner exits with the command's own status...
	cmd := labvm(repo, "run", "-kernel", "6.1", "-cmd", "echo out; exit 3")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("labvm run 'exit 3': want exit status 3, got %v", err)
	}
	if string(out) != "out\n" {
		t.Errorf("stdout: got %q, want %q", out, "out\n")
	}
	// ...and make fails and names it (make's own status is always 2).
	_, stderr, code := makeLabRun(t, repo, "KERNEL=6.1", "CMD=exit 3")
	if code == 0 || !strings.Contains(stderr, "command exited 3") {
		t.Errorf("make lab-run CMD='exit 3': exit %d, stderr:\n%s", code, stderr)
	}
}

// TestLabStreamsOutput checks that output arrives while the command runs.
func TestLabStreamsOutput(t *testing.T) {
	repo := needLab(t)
	cmd := labvm(repo, "run", "-kernel", "6.12", "-cmd", "echo first; echo err >&2; sleep 6; echo second")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]time.Time{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		seen[sc.Text()] = time.Now()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, l := range []string{"first", "err", "second"} {
		if seen[l].IsZero() {
			t.Fatalf("line %q missing from the output: %v", l, seen)
		}
	}
	if gap := seen["second"].Sub(seen["first"]); gap < 4*time.Second {
		t.Errorf("'first' arrived only %s before 'second': output is not streamed", gap)
	}
}

func TestLabExtraIsReadOnly(t *testing.T) {
	repo := needLab(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "sub", "data.txt"), "lab-extra-content\n")
	check := `cat /extra/sub/data.txt && if echo x >>/extra/sub/data.txt || touch /extra/new; then echo WRITABLE; exit 1; fi; echo read-only`
	out, stderr, code := makeLabRun(t, repo, "KERNEL=6.12", "CMD="+check, "LAB_EXTRA="+dir)
	if code != 0 || !strings.Contains(out, "lab-extra-content") || !strings.Contains(out, "read-only") {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
}

func TestLabDevices(t *testing.T) {
	repo := needLab(t)
	for _, k := range TestKernels {
		t.Run(k, func(t *testing.T) {
			out, stderr, code := makeLabRun(t, repo, "KERNEL="+k, "CMD=ibv_devices")
			if code != 0 || !strings.Contains(out, "rxe0") || !strings.Contains(out, "rxe1") {
				t.Errorf("ibv_devices on %s: exit %d, stdout:\n%s\nstderr:\n%s", k, code, out, stderr)
			}
			if !strings.Contains(stderr, "boot-to-command") {
				t.Errorf("no boot-to-command time on stderr:\n%s", stderr)
			}
		})
	}
}

func TestLabTimeoutKillsQemu(t *testing.T) {
	repo := needLab(t)
	cmd := labvm(repo, "run", "-kernel", "6.1", "-cmd", "sleep 600")
	cmd.Env = append(os.Environ(), "LAB_TIMEOUT=15")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 || !strings.Contains(string(out), "LAB_TIMEOUT") {
		t.Errorf("want exit 125 naming LAB_TIMEOUT, got %v:\n%s", err, out)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("timeout of 15s took %s", d)
	}
}

// TestLabBootTimeout checks the guard against a boot that makes no progress
// (as with KVM here): no word from the guest init in time fails the run.
func TestLabBootTimeout(t *testing.T) {
	repo := needLab(t)
	cmd := labvm(repo, "run", "-kernel", "6.12", "-cmd", "true")
	cmd.Env = append(os.Environ(), "LAB_BOOT_TIMEOUT=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 || !strings.Contains(string(out), "no boot progress after 1s") {
		t.Errorf("want exit 125 naming the boot timeout, got %v:\n%s", err, out)
	}
}

// LAB_INIT=systemd: Debian's systemd is PID 1, runs the command as a
// service with its output streamed, hands back its exit status, and powers
// the guest off.
func TestLabSystemdInit(t *testing.T) {
	repo := needLab(t)
	check := `echo "pid1=$(cat /proc/1/comm) unit=$(cat /proc/self/cgroup)"; exit 3`
	cmd := labvm(repo, "run", "-kernel", "6.12", "-cmd", check)
	cmd.Env = append(os.Environ(), "LAB_INIT=systemd")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), "pid1=systemd") ||
		!strings.Contains(string(out), "lab-cmd.service") {
		t.Errorf("labvm run with LAB_INIT=systemd: %v (want exit status 3), stdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
}
