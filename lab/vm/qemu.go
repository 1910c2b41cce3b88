package vm

import (
	"fmt"
	"strings"
)

// Boot describes one qemu boot of the lab.
type Boot struct {
	Kernel  string // vmlinuz
	Initrd  string
	Accel   string // tcg (default) or kvm
	MemMiB  int
	CPUs    int
	Shell   bool   // interactive: console on stdio
	Console string // ttyS0 target when not Shell, e.g. file:/dev/fd/5
	Output  string // ttyS1 target (CMD output)
	Control string // ttyS2 target (control lines)
	Quiet   bool   // kernel console: warnings only (and errors only when not Shell)
}

// QemuArgs returns qemu-system-x86_64's arguments for b. There are no
// network devices: the guest's only network is its own veth pair.
func QemuArgs(b Boot) ([]string, error) {
	accel, cpu := "tcg", "max"
	switch b.Accel {
	case "", "tcg":
	case "kvm":
		accel = "kvm"
	default:
		return nil, fmt.Errorf("unknown accelerator %q (want tcg or kvm)", b.Accel)
	}
	if b.MemMiB == 0 {
		b.MemMiB = 2048
	}
	if b.CPUs == 0 {
		b.CPUs = 2
	}
	cmdline := []string{"console=ttyS0", "rdinit=/init", "panic=-1", "mitigations=off"}
	if b.Quiet {
		cmdline = append(cmdline, "quiet")
		if !b.Shell {
			cmdline = append(cmdline, "loglevel=3")
		}
	}
	args := []string{
		"-accel", accel, "-cpu", cpu,
		"-m", fmt.Sprint(b.MemMiB), "-smp", fmt.Sprint(b.CPUs),
		"-nographic", "-nodefaults", "-no-reboot",
		"-kernel", b.Kernel, "-initrd", b.Initrd,
		"-append", strings.Join(cmdline, " "),
	}
	if b.Shell {
		args = append(args, "-serial", "mon:stdio", "-serial", "null", "-serial", "null")
	} else {
		for _, t := range []string{b.Console, b.Output, b.Control} {
			if t == "" {
				t = "null"
			}
			args = append(args, "-serial", t)
		}
	}
	return args, nil
}
