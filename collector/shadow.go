package collector

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/apmwatch/apmwatch/internal/btfview"
	"github.com/cilium/ebpf/btf"
)

// relocateAgainst chooses the probes' CO-RE targets: the kernel's BTF, its
// modules' and the external files, as cilium/ebpf takes them by default;
// or, when a module the probes read defines a type vmlinux also has with
// another layout (an out-of-tree ib_core: MLNX_OFED, DOCA-OFED), one
// target in which the modules' definitions replace vmlinux's
// (btfview.Shadow). Given both, CO-RE would refuse every program that
// reads such a type ("ambiguous relocation"). fentry's attach targets
// are the kernel's BTF either way.
func (l *loader) relocateAgainst(cache *btf.Cache, ext extBTF, modules []string) error {
	l.extra, l.extMods = ext.specs, ext.modules
	vmlinux, err := cache.Kernel()
	if err != nil {
		return nil // no kernel BTF: the loads say so, hook by hook
	}
	specs := append([]*btf.Spec(nil), ext.specs...)
	for _, m := range modules {
		if _, err := os.Stat(filepath.Join("/sys/kernel/btf", m)); err != nil {
			continue
		}
		spec, err := cache.Module(m)
		if err != nil {
			continue // the loads report a module whose BTF cannot be read
		}
		specs = append(specs, spec)
	}
	target, shadowed, err := btfview.Shadow(vmlinux, specs, l.spec.Types)
	if err != nil {
		return fmt.Errorf("choosing the probes' btf: %w", err)
	}
	if target != nil {
		l.kernelTypes, l.extra, l.shadowed = target, nil, shadowed
	}
	return nil
}
