package btfgen

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
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
	m := &minimizer{}
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
		name := essentialName(lt.TypeName())
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
			if !sameKind(tt, lt) {
				continue // a function or variable of that name (ib_uverbs_modify_qp is both)
			}
			id, err := module.TypeID(tt)
			if err != nil || int(id) < baseCount {
				continue // vmlinux's: relocated against vmlinux itself
			}
			if _, err := b.Add(m.conv(tt, lt)); err != nil {
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

// sameKind reports whether target is a struct, union or enum as local is:
// CO-RE relocates a local struct against structs only, and a function of
// the same name would carry its whole signature's graph into the copy.
func sameKind(target, local btf.Type) bool {
	switch local.(type) {
	case *btf.Struct:
		_, ok := target.(*btf.Struct)
		return ok
	case *btf.Union:
		_, ok := target.(*btf.Union)
		return ok
	case *btf.Enum:
		_, ok := target.(*btf.Enum)
		return ok
	}
	return false
}

// essentialName strips a CO-RE flavour ("ib_qp___v510" -> "ib_qp").
func essentialName(name string) string {
	if i := strings.Index(name, "___"); i > 0 {
		return name[:i]
	}
	return name
}

type minimizer struct{}

// conv is target's copy as the local view of it needs it.
func (m *minimizer) conv(target, local btf.Type) btf.Type {
	t := btf.UnderlyingType(target)
	var l btf.Type
	if local != nil {
		l = btf.UnderlyingType(local)
	}
	switch t := t.(type) {
	case *btf.Pointer:
		return &btf.Pointer{Target: &btf.Void{}}
	case *btf.Struct:
		return &btf.Struct{Name: t.Name, Size: t.Size, Members: m.members(t.Members, l)}
	case *btf.Union:
		return &btf.Union{Name: t.Name, Size: t.Size, Members: m.members(t.Members, l)}
	case *btf.Array:
		var le btf.Type
		if la, ok := l.(*btf.Array); ok {
			le = la.Type
		}
		return &btf.Array{Index: t.Index, Type: m.conv(t.Type, le), Nelems: t.Nelems}
	}
	return t // ints, enums, floats: as they are
}

// members keeps the target members the local view names; an anonymous
// target member is kept, trimmed, when it holds one.
func (m *minimizer) members(ms []btf.Member, local btf.Type) []btf.Member {
	var out []btf.Member
	for _, mem := range ms {
		if mem.Name == "" {
			switch btf.UnderlyingType(mem.Type).(type) {
			case *btf.Struct, *btf.Union:
				c := m.conv(mem.Type, local) // the local view names its fields flat or in its own anonymous member
				if len(members(c)) > 0 {
					out = append(out, btf.Member{Type: c, Offset: mem.Offset, BitfieldSize: mem.BitfieldSize})
				}
			}
			continue
		}
		lm, ok := localMember(local, mem.Name)
		if !ok {
			continue
		}
		out = append(out, btf.Member{Name: mem.Name, Type: m.conv(mem.Type, lm), Offset: mem.Offset, BitfieldSize: mem.BitfieldSize})
	}
	return out
}

func members(t btf.Type) []btf.Member {
	switch t := t.(type) {
	case *btf.Struct:
		return t.Members
	case *btf.Union:
		return t.Members
	}
	return nil
}

// localMember finds the local view's member called name, directly or in
// one of its anonymous members, and returns its type.
func localMember(local btf.Type, name string) (btf.Type, bool) {
	for _, mem := range members(local) {
		if mem.Name == name {
			return mem.Type, true
		}
		if mem.Name == "" {
			if t, ok := localMember(btf.UnderlyingType(mem.Type), name); ok {
				return t, true
			}
		}
	}
	return nil, false
}
