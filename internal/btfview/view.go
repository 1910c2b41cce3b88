// Package btfview makes the probes' views of kernel types: copies of a
// module's or vmlinux's struct, union or enum that keep only the members
// the probes' own BTF (the CO-RE views of bpf/ib_types.h) names, at their
// offsets, with the type's size. `apmwatch btf gen --min` writes such
// copies (btfgen.Minimize); the collector relocates against them where a
// module's definition must shadow vmlinux's (Shadow).
package btfview

import (
	"strings"

	"github.com/cilium/ebpf/btf"
)

// EssentialName strips a CO-RE flavour ("ib_qp___v510" -> "ib_qp").
func EssentialName(name string) string {
	if i := strings.Index(name, "___"); i > 0 {
		return name[:i]
	}
	return name
}

// IsViewKind reports whether t is a type the probes relocate by name: a
// struct, union or enum.
func IsViewKind(t btf.Type) bool {
	switch t.(type) {
	case *btf.Struct, *btf.Union, *btf.Enum:
		return true
	}
	return false
}

// SameKind reports whether target is a struct, union or enum as local is:
// CO-RE relocates a local struct against structs only, and a function of
// the same name would carry its whole signature's graph into the copy.
func SameKind(target, local btf.Type) bool {
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

// Conv is target's copy as the local view of it needs it: the members
// local names (inside anonymous members too), a pointer member pointing
// to void (the programs follow a pointer with a relocation of its own, on
// the pointee's name).
func Conv(target, local btf.Type) btf.Type {
	t := btf.UnderlyingType(target)
	var l btf.Type
	if local != nil {
		l = btf.UnderlyingType(local)
	}
	switch t := t.(type) {
	case *btf.Pointer:
		return &btf.Pointer{Target: &btf.Void{}}
	case *btf.Struct:
		return &btf.Struct{Name: t.Name, Size: t.Size, Members: convMembers(t.Members, l)}
	case *btf.Union:
		return &btf.Union{Name: t.Name, Size: t.Size, Members: convMembers(t.Members, l)}
	case *btf.Array:
		var le btf.Type
		if la, ok := l.(*btf.Array); ok {
			le = la.Type
		}
		return &btf.Array{Index: t.Index, Type: Conv(t.Type, le), Nelems: t.Nelems}
	}
	return t // ints, enums, floats: as they are
}

// convMembers keeps the target members the local view names; an
// anonymous target member is kept, trimmed, when it holds one.
func convMembers(ms []btf.Member, local btf.Type) []btf.Member {
	var out []btf.Member
	for _, mem := range ms {
		if mem.Name == "" {
			switch btf.UnderlyingType(mem.Type).(type) {
			case *btf.Struct, *btf.Union:
				c := Conv(mem.Type, local) // the local view names its fields flat or in its own anonymous member
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
		out = append(out, btf.Member{Name: mem.Name, Type: Conv(mem.Type, lm), Offset: mem.Offset, BitfieldSize: mem.BitfieldSize})
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
