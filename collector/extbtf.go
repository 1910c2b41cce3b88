package collector

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apmwatch/apmwatch/event"
	"github.com/cilium/ebpf/btf"
)

// External BTF for modules that carry none (MLNX_OFED and DOCA-OFED
// modules, RHEL 8-class kernels): DIR/MODULE.btf, split against vmlinux's
// BTF (pahole --btf_encode_detached --btf_base) or standalone. The probes'
// CO-RE relocations then find the modules' types there; fentry still needs
// the kernel's own BTF for the module, so such hooks attach with kprobes
// (and raw tracepoints). A module whose BTF the kernel exposes
// (/sys/kernel/btf/MODULE) keeps it: the running module's own is right by
// construction, a file may be stale. docs/audit.md, "Hosts with
// MLNX_OFED / DOCA-OFED".

// BTFDefaultDir is where external BTF is taken from when --btf is not
// given, if it exists: /var/lib/apmwatch/btf/$(uname -r).
func BTFDefaultDir() string { return filepath.Join("/var/lib/apmwatch/btf", kernelRelease()) }

// Bounds on what a BTF directory may hold: it is read by a root process.
const (
	maxBTFFiles    = 256
	maxBTFFileSize = 64 << 20
)

// extBTF is the external BTF taken for the modules without their own.
type extBTF struct {
	specs   []*btf.Spec
	modules []string // which modules they describe, sorted
}

// loadExtBTF reads dir. An explicit dir (--btf) must exist; the default
// one is skipped when absent. vmlinux gives the base of split files;
// sysBTF is the kernel's module BTF directory (/sys/kernel/btf).
func loadExtBTF(dir string, explicit bool, vmlinux func() (*btf.Spec, error), sysBTF string) (extBTF, error) {
	var out extBTF
	if dir == "" {
		return out, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return out, nil
		}
		return out, fmt.Errorf("reading the btf directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".btf") && e.Type().IsRegular() {
			files = append(files, name)
		}
	}
	if len(files) > maxBTFFiles {
		return out, fmt.Errorf("btf directory %s: %d files, at most %d", dir, len(files), maxBTFFiles)
	}
	var base *btf.Spec
	for _, name := range files {
		mod := strings.TrimSuffix(name, ".btf")
		if mod == "vmlinux" {
			continue // the kernel's own is used
		}
		if _, err := os.Stat(filepath.Join(sysBTF, mod)); err == nil {
			continue // the module has its own BTF
		}
		spec, err := readModuleBTF(filepath.Join(dir, name), func() (*btf.Spec, error) {
			if base == nil {
				if base, err = vmlinux(); err != nil {
					return nil, fmt.Errorf("split btf needs vmlinux's: %w", err)
				}
			}
			return base, nil
		})
		if err != nil {
			return out, err
		}
		out.specs = append(out.specs, spec)
		out.modules = append(out.modules, mod)
	}
	slices.Sort(out.modules)
	return out, nil
}

// readModuleBTF parses one file, standalone or split against vmlinux's.
func readModuleBTF(path string, vmlinux func() (*btf.Spec, error)) (*btf.Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading btf: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading btf: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() > maxBTFFileSize {
		return nil, fmt.Errorf("btf file %s: not a regular file of at most %d MiB", path, maxBTFFileSize>>20)
	}
	// Standalone first: a standalone file would also parse as split, its
	// type ids shifted onto vmlinux's; a split one refers to vmlinux's
	// ids, past its own types, and does not parse alone.
	r := io.NewSectionReader(f, 0, st.Size())
	spec, aerr := btf.LoadSpecFromReader(r)
	if aerr == nil {
		return spec, nil
	}
	base, err := vmlinux()
	if err != nil {
		return nil, fmt.Errorf("btf file %s is not standalone (%v), and %w", path, aerr, err)
	}
	spec, err = btf.LoadSplitSpecFromReader(r, base)
	if err != nil {
		return nil, fmt.Errorf("btf file %s is neither standalone (%v) nor split against this kernel's vmlinux: %w", path, aerr, err)
	}
	return spec, nil
}

// noteExt says, on the hooks planned with kprobes because their module has
// no BTF of its own, that their types come from the external BTF.
func noteExt(targets []target, modules []string) {
	for i := range targets {
		t := &targets[i]
		if t.method == event.HookKprobe && !t.btf && slices.Contains(modules, t.module) && t.reason == reasonNoBTF {
			t.reason = reasonNoBTF + " in the kernel; types from external btf"
		}
	}
}

// ProgramBTF is the probes' own BTF: the CO-RE views of the kernel types
// they read (bpf/ib_types.h), what `apmwatch btf gen --min` keeps of a
// module's BTF.
func ProgramBTF() (*btf.Spec, error) {
	spec, err := loadApm()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded probes: %w", err)
	}
	return spec.Types, nil
}

// ProgramRelocations are the CO-RE relocations of every probe program, in
// program order (btfgen's tests relocate them against whole and minimized
// BTF).
func ProgramRelocations() ([]*btf.CORERelocation, error) {
	spec, err := loadApm()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded probes: %w", err)
	}
	names := make([]string, 0, len(spec.Programs))
	for n := range spec.Programs {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []*btf.CORERelocation
	for _, n := range names {
		for i := range spec.Programs[n].Instructions {
			if r := btf.CORERelocationMetadata(&spec.Programs[n].Instructions[i]); r != nil {
				out = append(out, r)
			}
		}
	}
	return out, nil
}
