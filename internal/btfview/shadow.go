package btfview

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/cilium/ebpf/btf"
)

// Shadow builds the probes' relocation target where a module's own
// definition of a type must win over vmlinux's. vmlinux's BTF carries
// ib_core's types as the kernel's own tree defines them (ib_qp, ib_device,
// ib_event, ...); a module built out of tree (MLNX_OFED, DOCA-OFED) defines
// them again with its layout, and CO-RE, given both, finds two candidates
// and refuses ("ambiguous relocation"). A module's BTF split against
// vmlinux holds only the types it does not share with it (split
// deduplication), so a type it defines itself that vmlinux also has is
// one whose layout is the module's.
//
// For every struct, union and enum local (the probes' own BTF) names, the
// target holds the modules' own definitions when a module has one, else
// vmlinux's, each cut to the members local reads (Conv). It returns nil
// when no module shadows vmlinux (the kernel's own BTF is then used as it
// is), and the names shadowed, sorted.
func Shadow(vmlinux *btf.Spec, modules []*btf.Spec, local *btf.Spec) (*btf.Spec, []string, error) {
	views := map[string]btf.Type{}
	var names []string
	for lt, err := range local.All() {
		if err != nil {
			return nil, nil, fmt.Errorf("reading the programs' btf: %w", err)
		}
		name := EssentialName(lt.TypeName())
		if name == "" || !IsViewKind(lt) {
			continue
		}
		if _, ok := views[name]; !ok {
			views[name] = lt
			names = append(names, name)
		}
	}
	own := map[string][]btf.Type{} // a module's own definitions, by name
	for _, m := range modules {
		for t, err := range m.All() {
			if err != nil {
				return nil, nil, fmt.Errorf("reading a module's btf: %w", err)
			}
			if lt, ok := views[t.TypeName()]; ok && SameKind(t, lt) {
				own[t.TypeName()] = append(own[t.TypeName()], t)
			}
		}
	}
	kernel := func(name string) []btf.Type {
		ts, _ := vmlinux.AnyTypesByName(name)
		return slices.DeleteFunc(ts, func(t btf.Type) bool { return !SameKind(t, views[name]) })
	}
	var shadowed []string
	for _, name := range names {
		if len(own[name]) > 0 && len(kernel(name)) > 0 {
			shadowed = append(shadowed, name)
		}
	}
	if len(shadowed) == 0 {
		return nil, nil, nil
	}
	b, err := btf.NewBuilder(nil, nil)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range names {
		from := own[name]
		if len(from) == 0 {
			from = kernel(name)
		}
		for _, t := range from {
			if _, err := b.Add(Conv(t, views[name])); err != nil {
				return nil, nil, fmt.Errorf("copying %s: %w", name, err)
			}
		}
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("writing the relocation target: %w", err)
	}
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the relocation target: %w", err)
	}
	slices.Sort(shadowed)
	return spec, shadowed, nil
}
