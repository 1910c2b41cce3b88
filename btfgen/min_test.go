package btfgen

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/apmwatch/apmwatch/collector"
)

// synth builds a module's BTF from the programs' own views: every member
// they name, at other offsets, between members they do not (pointers to a
// large unrelated struct, ints, an array), one of them inside an anonymous
// union; the types vmlinux has (pt_regs, task_struct) go to base.
type synth struct {
	done  map[btf.Type]btf.Type
	junk  *btf.Struct
	base  []btf.Type
	mod   []btf.Type
	inVml map[string]bool
}

func (s *synth) target(l btf.Type) btf.Type {
	l = btf.UnderlyingType(l)
	if t, ok := s.done[l]; ok {
		return t
	}
	switch l := l.(type) {
	case *btf.Int:
		return &btf.Int{Name: l.Name, Size: l.Size, Encoding: l.Encoding}
	case *btf.Pointer:
		return &btf.Pointer{Target: s.target(l.Target)}
	case *btf.Void:
		return &btf.Void{}
	case *btf.Enum:
		t := &btf.Enum{Name: l.Name, Size: 4, Values: []btf.EnumValue{{Name: l.Name + "_A", Value: 0}, {Name: l.Name + "_B", Value: 7}}}
		s.done[l] = t
		s.add(l.Name, t)
		return t
	case *btf.Array:
		return &btf.Array{Index: &btf.Int{Name: "int", Size: 4}, Type: s.target(l.Type), Nelems: l.Nelems}
	case *btf.Struct, *btf.Union:
		var ms []btf.Member
		var named string
		var members []btf.Member
		switch l := l.(type) {
		case *btf.Struct:
			members, named = l.Members, l.Name
		case *btf.Union:
			members, named = l.Members, l.Name
		}
		_, union := l.(*btf.Union)
		var t btf.Type
		if union {
			t = &btf.Union{Name: named}
		} else {
			t = &btf.Struct{Name: named}
		}
		s.done[l] = t
		off := uint32(0)
		put := func(m btf.Member) {
			size, _ := btf.Sizeof(m.Type)
			if union {
				m.Offset = 0
			} else {
				m.Offset = btf.Bits(off * 8)
				off += uint32(size)
				off = (off + 7) &^ 7
			}
			ms = append(ms, m)
		}
		for i, lm := range members {
			if !union {
				put(btf.Member{Name: fmt.Sprintf("junk_ptr%d", i), Type: &btf.Pointer{Target: s.junk}})
				put(btf.Member{Name: fmt.Sprintf("junk_int%d", i), Type: &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}})
			}
			if !union && i == 0 && lm.Name != "" {
				// the first named member inside an anonymous union, beside one unused
				u := &btf.Union{Members: []btf.Member{{Name: lm.Name, Type: s.target(lm.Type)},
					{Name: "junk_alias", Type: &btf.Array{Index: &btf.Int{Name: "int", Size: 4}, Type: &btf.Int{Name: "char", Size: 1}, Nelems: 24}}}}
				usz, _ := btf.Sizeof(u.Members[0].Type)
				u.Size = uint32(max(usz, 24))
				put(btf.Member{Type: u})
				continue
			}
			put(btf.Member{Name: lm.Name, Type: s.target(lm.Type)})
		}
		size := off
		if union {
			for _, m := range ms {
				if sz, _ := btf.Sizeof(m.Type); uint32(sz) > size {
					size = uint32(sz)
				}
			}
		}
		switch t := t.(type) {
		case *btf.Struct:
			t.Members, t.Size = ms, size
		case *btf.Union:
			t.Members, t.Size = ms, size
		}
		if named != "" {
			s.add(named, t)
		}
		return t
	}
	return &btf.Void{}
}

func (s *synth) add(name string, t btf.Type) {
	if s.inVml[name] {
		s.base = append(s.base, t)
	} else {
		s.mod = append(s.mod, t)
	}
}

func marshal(t *testing.T, types []btf.Type) *btf.Spec {
	t.Helper()
	b, err := btf.NewBuilder(types, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// A minimized module BTF relocates every CO-RE relocation of the probes
// exactly as the whole does, and holds none of the types they never read.
func TestMinimizeRelocatesAlike(t *testing.T) {
	local, err := collector.ProgramBTF()
	if err != nil {
		t.Fatal(err)
	}
	relos, err := collector.ProgramRelocations()
	if err != nil || len(relos) < 20 {
		t.Fatalf("%d relocations: %v", len(relos), err)
	}
	junk := &btf.Struct{Name: "junk_type", Size: 64}
	for i := range 8 {
		junk.Members = append(junk.Members, btf.Member{Name: fmt.Sprintf("j%d", i), Type: &btf.Int{Name: "long", Size: 8}, Offset: btf.Bits(i * 64)})
	}
	s := &synth{done: map[btf.Type]btf.Type{}, junk: junk, inVml: map[string]bool{"pt_regs": true, "task_struct": true}}
	for lt, err := range local.All() {
		if err != nil {
			t.Fatal(err)
		}
		switch lt.(type) {
		case *btf.Struct, *btf.Union, *btf.Enum:
			if lt.TypeName() != "" {
				s.target(lt)
			}
		}
	}
	s.mod = append(s.mod, junk)
	// a function named like a struct the probes read (ib_uverbs has both
	// a struct and a function ib_uverbs_modify_qp): not a type to copy
	s.mod = append(s.mod, &btf.Func{Name: "ib_uverbs_modify_qp", Linkage: btf.StaticFunc,
		Type: &btf.FuncProto{Return: &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed},
			Params: []btf.FuncParam{{Name: "attrs", Type: &btf.Pointer{Target: junk}}}}})
	base := marshal(t, s.base)
	whole := marshal(t, s.mod)
	raw, err := Minimize(whole, false, base, local)
	if err != nil {
		t.Fatal(err)
	}
	min, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the minimized btf does not parse: %v", err)
	}
	if _, err := min.AnyTypesByName("junk_type"); err == nil {
		t.Error("the minimized btf keeps a type the probes never read")
	}
	if _, err := min.AnyTypesByName("task_struct"); err == nil {
		t.Error("the minimized btf copies a type of vmlinux")
	}
	for ty := range min.All() {
		for _, m := range members(ty) {
			if len(m.Name) > 4 && m.Name[:4] == "junk" {
				t.Errorf("%s keeps the unread member %s", ty.TypeName(), m.Name)
			}
		}
	}
	id := func(btf.Type) (btf.TypeID, error) { return 1, nil }
	relocate := func(mod *btf.Spec) []string {
		fix, err := btf.CORERelocate(relos, []*btf.Spec{base, mod}, binary.LittleEndian, id)
		if err != nil {
			t.Fatalf("relocating: %v", err)
		}
		var out []string
		for i := range fix {
			out = append(out, fix[i].String())
		}
		return out
	}
	w, m := relocate(whole), relocate(min)
	if !slices.Equal(w, m) {
		for i := range w {
			if w[i] != m[i] {
				t.Errorf("relocation %s: whole %s, minimized %s", relos[i], w[i], m[i])
			}
		}
	}
	poisoned := 0
	for _, f := range w {
		if bytes.Contains([]byte(f), []byte("poison")) {
			poisoned++
		}
	}
	if poisoned > len(w)/2 {
		t.Errorf("%d of %d relocations found nothing even in the whole btf: the synthetic module is wrong", poisoned, len(w))
	}
	t.Logf("%d relocations alike; %d of them poisoned in both; whole %d types, minimized %d bytes", len(w), poisoned, len(s.mod), len(raw))
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
