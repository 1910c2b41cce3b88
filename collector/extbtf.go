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
	"github.com/apmwatch/apmwatch/internal/btfview"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/apmwatch/apmwatch/internal/modid"
	"github.com/apmwatch/apmwatch/internal/trusted"
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
// A module's BTF is tens to hundreds of KiB (a standalone one from pahole
// a few MiB); a file that defines a type the probes read more often than
// maxCandidates times is no module's.
const (
	maxBTFFiles    = 64
	maxBTFFileSize = 16 << 20
	maxBTFTotal    = 64 << 20
	maxCandidates  = 8
)

// extBTF is the external BTF taken for the modules without their own.
type extBTF struct {
	specs   []*btf.Spec
	modules []string // which modules they describe, sorted
	ignored []string // files not taken, and why (a module no probe reads, not loaded)
}

// extDir is where external BTF is read from and what it may describe.
type extDir struct {
	dir      string
	explicit bool      // --btf: must exist; the default dir is skipped when absent
	sysBTF   string    // /sys/kernel/btf: a module there keeps its own
	sysMod   string    // /sys/module: the loaded modules' identities
	modules  []string  // the modules whose types the probes read
	local    *btf.Spec // the probes' own BTF (the types they read)
}

// loadExtBTF reads the directory. It must be root's or this user's and
// writable by no one else (the default one's parents too), and each file
// likewise; a file is taken only for a module the probes read that is
// loaded, and only when the identity `apmwatch btf gen` recorded beside it
// (MODULE.btf.id) is the loaded module's build. vmlinux gives the base of
// split files.
func loadExtBTF(d extDir, vmlinux func() (*btf.Spec, error)) (extBTF, error) {
	var out extBTF
	if d.dir == "" {
		return out, nil
	}
	if err := trusted.Dir(d.dir, !d.explicit); err != nil {
		if !d.explicit && errors.Is(err, fs.ErrNotExist) {
			return out, nil
		}
		return out, fmt.Errorf("btf directory: %w", err)
	}
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return out, fmt.Errorf("reading the btf directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".btf") {
			files = append(files, name)
		}
	}
	if len(files) > maxBTFFiles {
		return out, fmt.Errorf("btf directory %s: %d files, at most %d", d.dir, len(files), maxBTFFiles)
	}
	var base *btf.Spec
	var total int64
	for _, name := range files {
		mod := strings.TrimSuffix(name, ".btf")
		path := filepath.Join(d.dir, name)
		if mod == "vmlinux" {
			continue // the kernel's own is used
		}
		if !slices.Contains(d.modules, mod) {
			out.ignored = append(out.ignored, escape.Text(path)+": no probe reads module "+escape.Text(mod))
			continue
		}
		if _, err := os.Stat(filepath.Join(d.sysBTF, mod)); err == nil {
			continue // the module has its own BTF
		}
		loaded, ok, err := modid.Loaded(d.sysMod, mod)
		if err != nil {
			return out, err
		}
		if !ok {
			out.ignored = append(out.ignored, escape.Text(path)+": "+mod+" is not loaded")
			continue
		}
		if err := checkIdentity(path, loaded); err != nil {
			return out, err
		}
		spec, size, err := readModuleBTF(path, func() (*btf.Spec, error) {
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
		if total += size; total > maxBTFTotal {
			return out, fmt.Errorf("btf directory %s: more than %d MiB of btf", d.dir, maxBTFTotal>>20)
		}
		if err := checkCandidates(path, spec, d.local); err != nil {
			return out, err
		}
		out.specs = append(out.specs, spec)
		out.modules = append(out.modules, mod)
	}
	slices.Sort(out.modules)
	return out, nil
}

// checkIdentity refuses a file made from another build than the loaded
// module: after an OFED upgrade, or made from the inbox file of a module
// OFED replaced, its offsets are not the running module's.
func checkIdentity(path string, loaded modid.ID) error {
	rec, err := modid.ReadSidecar(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("btf file %s has no record of the module build it describes (%s): run apmwatch btf gen",
			escape.Text(path), escape.Text(modid.SidecarPath(path)))
	}
	if err != nil {
		return fmt.Errorf("btf file %s: %w", escape.Text(path), err)
	}
	if err := modid.Match(rec, loaded); err != nil {
		return fmt.Errorf("btf file %s is not the loaded module's: %w; run apmwatch btf gen", escape.Text(path), err)
	}
	return nil
}

// checkCandidates bounds the definitions a file gives of each type the
// probes read: CO-RE weighs every one of them against every relocation.
func checkCandidates(path string, spec, local *btf.Spec) error {
	seen := map[string]bool{}
	for lt := range local.All() {
		name := lt.TypeName()
		if name == "" || seen[name] || !btfview.IsViewKind(lt) {
			continue
		}
		seen[name] = true
		if ts, _ := spec.AnyTypesByName(name); len(ts) > maxCandidates {
			return fmt.Errorf("btf file %s defines %s %d times (at most %d): refusing it", escape.Text(path), name, len(ts), maxCandidates)
		}
	}
	return nil
}

// readModuleBTF parses one file, standalone or split against vmlinux's.
func readModuleBTF(path string, vmlinux func() (*btf.Spec, error)) (*btf.Spec, int64, error) {
	f, st, err := trusted.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("reading btf: %w", err)
	}
	defer f.Close()
	if st.Size() > maxBTFFileSize {
		return nil, 0, fmt.Errorf("btf file %s: larger than %d MiB", escape.Text(path), maxBTFFileSize>>20)
	}
	// Standalone first: a standalone file would also parse as split, its
	// type ids shifted onto vmlinux's; a split one refers to vmlinux's
	// ids, past its own types, and does not parse alone.
	r := io.NewSectionReader(f, 0, st.Size())
	spec, aerr := btf.LoadSpecFromReader(r)
	if aerr == nil {
		return spec, st.Size(), nil
	}
	base, err := vmlinux()
	if err != nil {
		return nil, 0, fmt.Errorf("btf file %s is not standalone (%v), and %w", escape.Text(path), aerr, err)
	}
	spec, err = btf.LoadSplitSpecFromReader(r, base)
	if err != nil {
		return nil, 0, fmt.Errorf("btf file %s is neither standalone (%v) nor split against this kernel's vmlinux: %w", escape.Text(path), aerr, err)
	}
	return spec, st.Size(), nil
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
