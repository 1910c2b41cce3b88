package btfgen

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/btf"

	"github.com/apmwatch/apmwatch/internal/btfview"
)

// Minimize returns the types of module (a module's BTF, split against
// base) that apmwatch's programs read, as standalone BTF: for every named
// struct, union and enum of local (the programs' own BTF, the CO-RE views
// of bpf/ib_types.h) that module defines, a copy that keeps only the
// members the local view names (inside anonymous members too), at their
// offsets, with the type's size; a pointer member points to void (the
// programs follow a pointer with a relocation of its own, on the pointee's
// name). A type vmlinux has is left out: the programs relocate it against
// vmlinux (for a standalone module BTF, by name; for a split one, the
// types of its base part). CO-RE finds the same members at the same offsets, sizes and kinds
// in the copy as in the whole (TestMinimizeRelocatesAlike).
func Minimize(module *btf.Spec, split bool, base *btf.Spec, local *btf.Spec) ([]byte, error) {
	baseCount := 0
	if split {
		for _, err := range base.All() {
			if err != nil {
				return nil, fmt.Errorf("reading the vmlinux btf: %w", err)
			}
			baseCount++
		}
	}
	b, err := btf.NewBuilder(nil, nil)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	kept := 0
	for lt, err := range local.All() {
		if err != nil {
			return nil, fmt.Errorf("reading the programs' btf: %w", err)
		}
		name := btfview.EssentialName(lt.TypeName())
		if name == "" || seen[name] {
			continue
		}
		switch lt.(type) {
		case *btf.Struct, *btf.Union, *btf.Enum:
		default:
			continue
		}
		seen[name] = true
		if !split {
			if _, err := base.AnyTypesByName(name); err == nil {
				continue // vmlinux has it
			}
		}
		targets, err := module.AnyTypesByName(name)
		if errors.Is(err, btf.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, tt := range targets {
			if !btfview.SameKind(tt, lt) {
				continue // a function or variable of that name (ib_uverbs_modify_qp is both)
			}
			id, err := module.TypeID(tt)
			if err != nil || int(id) < baseCount {
				continue // vmlinux's: relocated against vmlinux itself
			}
			if _, err := b.Add(btfview.Conv(tt, lt)); err != nil {
				return nil, fmt.Errorf("minimizing %s: %w", name, err)
			}
			kept++
		}
	}
	if kept == 0 {
		return nil, errors.New("the module defines none of the types apmwatch reads")
	}
	return b.Marshal(nil, nil)
}
