package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Kernels are the lab kernel names, oldest first.
var Kernels = []string{"5.10", "6.1", "6.12", "7.2"}

// TestKernels are the kernels make lab-test and lab-host-test boot (the
// host suite's, fetched by a plain make setup); the others are fetched
// when KERNEL names them.
var TestKernels = []string{"6.1", "6.12"}

// DefaultKernel is used when none is named.
const DefaultKernel = "6.12"

// CheckKernelName rejects anything but a lab kernel name.
func CheckKernelName(name string) error {
	for _, k := range Kernels {
		if name == k {
			return nil
		}
	}
	return fmt.Errorf("unknown kernel %q (want one of %s)", name, strings.Join(Kernels, ", "))
}

// Paths are the directories the lab works in.
type Paths struct {
	Repo  string // the source tree (lab/initramfs/init, bin/apmwatch)
	Cache string // downloads: $(CACHE), kernels in Cache/kernels/<name>
	Build string // build outputs: $(BUILD)
}

// A Kernel is a lab kernel unpacked by lab/setup-host.sh.
type Kernel struct {
	Name    string // 5.10, 6.1, 6.12 or 7.2
	Version string // e.g. 6.1.0-57-amd64
	Dir     string // Cache/kernels/<Name>: kver, vmlinuz, lib/modules/<Version>
}

// Vmlinuz is the kernel image.
func (k Kernel) Vmlinuz() string { return filepath.Join(k.Dir, "vmlinuz") }

// DebugDir holds the debug files of the RDMA modules of a kernel whose
// modules carry no BTF (5.10), or does not exist.
func (k Kernel) DebugDir() string { return filepath.Join(k.Dir, "dbg") }

// NeedsBTF says the kernel's modules carry no BTF, so its image gets the
// files apmwatch btf gen makes from their debug info (setup fetched it).
func (k Kernel) NeedsBTF() bool {
	_, err := os.Stat(filepath.Join(k.DebugDir(), "kver"))
	return err == nil
}

// ModulesDir is lib/modules/<Version> of the unpacked package.
func (k Kernel) ModulesDir() string { return filepath.Join(k.Dir, "lib", "modules", k.Version) }

// LoadKernel finds a kernel that setup-host.sh fetched.
func LoadKernel(p Paths, name string) (Kernel, error) {
	if err := CheckKernelName(name); err != nil {
		return Kernel{}, err
	}
	k := Kernel{Name: name, Dir: filepath.Join(p.Cache, "kernels", name)}
	b, err := os.ReadFile(filepath.Join(k.Dir, "kver"))
	if err != nil {
		return Kernel{}, fmt.Errorf("kernel %s not fetched (run lab/setup-host.sh): %w", name, err)
	}
	k.Version = strings.TrimSpace(string(b))
	for _, f := range []string{k.Vmlinuz(), filepath.Join(k.ModulesDir(), "modules.dep")} {
		if _, err := os.Stat(f); err != nil {
			return Kernel{}, fmt.Errorf("kernel %s incomplete (run lab/setup-host.sh): %w", name, err)
		}
	}
	return k, nil
}

// AssetDir holds the built guest image of a kernel: Build/lab/vm/<name>.
func (p Paths) AssetDir(name string) string { return filepath.Join(p.Build, "lab", "vm", name) }

// Initramfs is the built base initramfs of a kernel.
func (p Paths) Initramfs(name string) string {
	return filepath.Join(p.AssetDir(name), "initramfs.cpio")
}
