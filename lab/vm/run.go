package vm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RunConfig is one boot of a fresh guest.
type RunConfig struct {
	Paths       Paths
	Kernel      string        // 6.1 or 6.12
	Cmd         string        // run with sh -c as root; empty with Shell
	Extra       string        // host directory shown read-only at /extra, optional
	Shell       bool          // interactive shell on the terminal instead of Cmd
	Systemd     bool          // run Cmd as a service of Debian's systemd, PID 1 after set-up
	Accel       string        // tcg (default) or kvm
	Timeout     time.Duration // whole run; qemu is killed after it
	BootTimeout time.Duration // until the guest init reports; catches a hung KVM boot
	Verbose     bool          // copy the kernel console to Stderr
	Stdout      io.Writer     // CMD's output
	Stderr      io.Writer     // the runner's own messages
}

// ErrTimeout is returned when the run or the boot took too long.
var ErrTimeout = errors.New("timed out")

// Run boots a fresh guest and runs the command; it returns the command's
// exit status. qemu is killed when ctx ends, on timeout, and if this process dies.
func Run(ctx context.Context, c RunConfig) (int, error) {
	k, err := LoadKernel(c.Paths, c.Kernel)
	if err != nil {
		return 0, err
	}
	if !c.Shell && strings.TrimSpace(c.Cmd) == "" {
		return 0, errors.New("no command given (CMD is empty)")
	}
	base := c.Paths.Initramfs(k.Name)
	if _, err := os.Stat(base); err != nil {
		return 0, fmt.Errorf("no initramfs for %s (run make lab-assets KERNEL=%s): %w", k.Name, k.Name, err)
	}
	tmp, err := os.MkdirTemp("", "apmwatch-lab-*")
	if err != nil {
		return 0, err
	}
	keep := false
	defer func() {
		if keep { // the console log stays for the error message
			os.Remove(filepath.Join(tmp, "initrd.cpio"))
		} else {
			os.RemoveAll(tmp)
		}
	}()
	initrd := filepath.Join(tmp, "initrd.cpio")
	if err := writeRunInitrd(initrd, base, c); err != nil {
		return 0, fmt.Errorf("preparing the %s guest: %w", k.Name, err)
	}
	if c.Shell {
		return runShell(ctx, c, k, initrd)
	}
	status, err := runCmd(ctx, c, k, initrd, tmp)
	if errors.Is(err, errBootPanic) {
		// once: a second panic before the command is an error like any other
		fmt.Fprintf(c.Stderr, "lab: %s: %v\nlab: %s: booting again, once\n", k.Name, err, k.Name)
		status, err = runCmd(ctx, c, k, initrd, tmp)
	}
	if err != nil {
		keep = true
	}
	return status, err
}

// errBootPanic: the guest's kernel panicked before /init ran, so before
// the command. Under TCG with two vCPUs the kernel's live code patching
// (text_poke_bp's int3) now and then oopses in early boot on a loaded
// host ("Oops: int3" in ktime_get_update_offsets_now, seen on 6.12 and
// 7.2); nothing of the command ran, so Run boots again, once.
var errBootPanic = errors.New("the guest's kernel panicked while booting, before the command ran")

// bootPanicked reports whether a console log shows a kernel panic.
func bootPanicked(console []byte) bool {
	return bytes.Contains(console, []byte("Kernel panic - not syncing"))
}

// writeRunInitrd writes the base image followed by a small archive with the
// mode, the command and LAB_EXTRA's files; the kernel unpacks both.
func writeRunInitrd(name, base string, c RunConfig) error {
	a := NewArchive()
	mode := "run"
	if c.Shell {
		mode = "shell"
	}
	if c.Systemd && !c.Shell {
		mode = "systemd"
	}
	a.File("etc/lab/mode", 0o644, []byte(mode+"\n"))
	a.File("etc/lab/cmd", 0o644, []byte(c.Cmd+"\n"))
	if c.Extra != "" {
		if err := AddTree(a, "extra", c.Extra); err != nil {
			return fmt.Errorf("adding LAB_EXTRA: %w", err)
		}
	}
	out, err := os.Create(name)
	if err != nil {
		return err
	}
	defer out.Close()
	in, err := os.Open(base)
	if err != nil {
		return err
	}
	defer in.Close()
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	if _, err := a.WriteTo(out); err != nil {
		return err
	}
	return out.Close()
}

func qemuCommand(ctx context.Context, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func runShell(ctx context.Context, c RunConfig, k Kernel, initrd string) (int, error) {
	args, err := QemuArgs(Boot{Kernel: k.Vmlinuz(), Initrd: initrd, Accel: c.Accel, Shell: true, Quiet: true})
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(c.Stderr, "lab: booting %s (%s); quit the shell with 'exit' (or Ctrl-A x)\n", k.Name, k.Version)
	cmd := qemuCommand(ctx, args)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("qemu (%s): %w", k.Name, err)
	}
	return 0, nil
}

// runCmd boots with the three serial ports on pipes: console to a log,
// output to c.Stdout, control lines parsed here.
func runCmd(ctx context.Context, c RunConfig, k Kernel, initrd, tmp string) (int, error) {
	logPath := filepath.Join(tmp, "console.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	var readers [3]*os.File
	var writers []*os.File
	for i := range readers {
		r, w, err := os.Pipe()
		if err != nil {
			return 0, err
		}
		defer r.Close()
		readers[i] = r
		writers = append(writers, w)
	}
	// In qemu the pipes are fds 3 (console), 4 (output), 5 (control).
	args, err := QemuArgs(Boot{
		Kernel: k.Vmlinuz(), Initrd: initrd, Accel: c.Accel, Quiet: true,
		Console: "file:/dev/fd/3", Output: "file:/dev/fd/4", Control: "file:/dev/fd/5",
	})
	if err != nil {
		return 0, err
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if c.Timeout > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeoutCause(runCtx, c.Timeout,
			fmt.Errorf("%w: the run took more than %s (LAB_TIMEOUT)", ErrTimeout, c.Timeout))
		defer stop()
	}
	cmd := qemuCommand(runCtx, args)
	cmd.ExtraFiles = writers
	cmd.Stdin = nil
	var qemuErr strings.Builder
	cmd.Stdout, cmd.Stderr = &qemuErr, &qemuErr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting qemu: %w", err)
	}
	for _, w := range writers {
		w.Close()
	}

	var wg sync.WaitGroup
	var console io.Writer = logf
	if c.Verbose {
		console = io.MultiWriter(logf, c.Stderr)
	}
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(console, readers[0]) }()
	go func() { defer wg.Done(); io.Copy(c.Stdout, readers[1]) }()

	st := &runState{}
	booted := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(readers[2])
		for sc.Scan() {
			ctl, ok := ParseControl(sc.Text())
			if !ok {
				continue
			}
			st.note(ctl, time.Since(start), k, c.Stderr, booted)
		}
	}()
	if c.BootTimeout > 0 {
		go func() {
			select {
			case <-booted:
			case <-runCtx.Done():
			case <-time.After(c.BootTimeout):
				cancel(fmt.Errorf("%w: no boot progress after %s with accel=%s%s", ErrTimeout,
					c.BootTimeout, accelName(c.Accel), kvmHint(c.Accel)))
			}
		}()
	}
	waitErr := cmd.Wait()
	wg.Wait()
	if cause := context.Cause(runCtx); cause != nil && runCtx.Err() != nil {
		return 0, fmt.Errorf("booting %s: %w%s", k.Name, cause, consoleTail(logPath))
	}
	if st.fail != "" {
		return 0, fmt.Errorf("guest set-up on %s failed: %s%s", k.Name, st.fail, consoleTail(logPath))
	}
	if !st.exited && !st.initSeen {
		if b, err := os.ReadFile(logPath); err == nil && bootPanicked(b) {
			return 0, fmt.Errorf("%s: %w%s", k.Name, errBootPanic, consoleTail(logPath))
		}
	}
	if !st.exited {
		msg := strings.TrimSpace(qemuErr.String())
		if waitErr != nil {
			msg = fmt.Sprintf("%v %s", waitErr, msg)
		}
		return 0, fmt.Errorf("guest %s stopped without reporting the command's status (%s)%s%s",
			k.Name, msg, kvmHint(c.Accel), consoleTail(logPath))
	}
	fmt.Fprintf(c.Stderr, "lab: %s: command exited %d after %.1fs (total %.1fs)\n",
		k.Name, st.status, (st.exitAt - st.readyAt).Seconds(), time.Since(start).Seconds())
	return st.status, nil
}

// runState is what the control port has told so far.
type runState struct {
	readyAt, exitAt time.Duration
	exited          bool
	status          int
	fail            string
	initSeen        bool
}

func (s *runState) note(ctl Control, at time.Duration, k Kernel, stderr io.Writer, booted chan struct{}) {
	if ctl["stage"] == "init" && !s.initSeen {
		s.initSeen = true
		close(booted)
		fmt.Fprintf(stderr, "lab: booted %s (guest uname -r: %s) in %.1fs\n", k.Name, ctl["kernel"], at.Seconds())
	}
	if ctl["stage"] == "ready" {
		s.readyAt = at
		fmt.Fprintf(stderr, "lab: %s: rxe0, rxe1 ACTIVE; boot-to-command %.1fs\n", k.Name, at.Seconds())
	}
	if f, ok := ctl["fail"]; ok {
		s.fail = f
	}
	if n, ok := ctl.Exit(); ok {
		s.exited, s.status, s.exitAt = true, n, at
	}
}

func accelName(a string) string {
	if a == "" {
		return "tcg"
	}
	return a
}

func kvmHint(a string) string {
	if a == "kvm" {
		return " (qemu with KVM is known to hang or abort early in boot on these machines: unset LAB_ACCEL to use tcg)"
	}
	return ""
}

// ansiEscape matches the terminal control sequences SeaBIOS prints.
var ansiEscape = regexp.MustCompile(`\x1b(\[[0-9;?]*[A-Za-z]|c)|\r`)

// consoleTail returns the end of the console log for an error message.
func consoleTail(logPath string) string {
	b, err := os.ReadFile(logPath)
	if err != nil || len(b) == 0 {
		return fmt.Sprintf("\n(console log %s is empty)", logPath)
	}
	lines := strings.Split(strings.TrimRight(ansiEscape.ReplaceAllString(string(b), ""), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return fmt.Sprintf("\nlast console lines (whole log: %s):\n  %s", logPath, strings.Join(lines, "\n  "))
}
