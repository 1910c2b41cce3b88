package btfview_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/apmwatch/apmwatch/collector"
	"github.com/apmwatch/apmwatch/internal/btfview"
)

// spec marshals types into a standalone BTF spec.
func spec(t *testing.T, types ...btf.Type) *btf.Spec {
	t.Helper()
	b, err := btf.NewBuilder(types, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// kernelAndOFED makes a vmlinux whose types are the probes' own views (the
// inbox layouts, as far as the probes read them) and an out-of-tree
// ib_core whose struct ib_device has every member shift bytes further on:
// the five NVMf operations of OFED 24.07's ib_device_ops move name and
// index this way.
func kernelAndOFED(t *testing.T, shift uint32) (vmlinux, ofed, local *btf.Spec) {
	t.Helper()
	local, err := collector.ProgramBTF()
	if err != nil {
		t.Fatal(err)
	}
	var kt []btf.Type
	var dev *btf.Struct
	seen := map[string]bool{}
	for lt := range local.All() {
		name := lt.TypeName()
		if name == "" || !btfview.IsViewKind(lt) || seen[name] {
			continue
		}
		seen[name] = true
		c := btfview.Conv(lt, lt)
		kt = append(kt, c)
		if name == "ib_device" {
			dev = c.(*btf.Struct)
		}
	}
	if dev == nil {
		t.Fatal("the probes read no struct ib_device")
	}
	moved := &btf.Struct{Name: "ib_device", Size: dev.Size + shift}
	for _, m := range dev.Members {
		m.Offset += btf.Bits(shift * 8)
		moved.Members = append(moved.Members, m)
	}
	return spec(t, kt...), spec(t, moved), local
}

// offsets relocates the probes against targets and returns, for every
// relocation of a member of struct ib_device, the offset it resolved to.
func offsets(t *testing.T, targets []*btf.Spec) (map[string]uint64, error) {
	t.Helper()
	relos, err := collector.ProgramRelocations()
	if err != nil {
		t.Fatal(err)
	}
	fixups, err := btf.CORERelocate(relos, targets, binary.LittleEndian, func(btf.Type) (btf.TypeID, error) { return 1, nil })
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for i, r := range relos {
		s := r.String()
		if !strings.Contains(s, "ib_device") || !strings.Contains(s, "byte_off") {
			continue
		}
		_, f, _ := strings.Cut(fixups[i].String(), "=") // "byte_off=LOCAL->TARGET"
		var local, target uint64
		if _, err := fmt.Sscanf(f, "%d->%d", &local, &target); err != nil {
			continue
		}
		out[s] = target
	}
	return out, nil
}

func TestShadowedModuleTypes(t *testing.T) {
	const shift = 40
	vmlinux, ofed, local := kernelAndOFED(t, shift)

	// Both as targets, as the kernel's module BTF or --btf gives them:
	// CO-RE finds two ib_device and refuses.
	if _, err := offsets(t, []*btf.Spec{vmlinux, ofed}); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("vmlinux and the module's ib_device together: %v, want an ambiguous relocation", err)
	}
	inbox, err := offsets(t, []*btf.Spec{vmlinux})
	if err != nil || len(inbox) < 2 {
		t.Fatalf("vmlinux alone: %v (%d ib_device members)", err, len(inbox))
	}

	target, shadowed, err := btfview.Shadow(vmlinux, []*btf.Spec{ofed}, local)
	if err != nil {
		t.Fatal(err)
	}
	if len(shadowed) != 1 || shadowed[0] != "ib_device" {
		t.Fatalf("shadowed = %v, want [ib_device]", shadowed)
	}
	got, err := offsets(t, []*btf.Spec{target})
	if err != nil {
		t.Fatalf("relocating against the merged target: %v", err)
	}
	for r, off := range inbox {
		if got[r] != off+shift {
			t.Errorf("%s: %d, want the module's %d (vmlinux's %d)", r, got[r], off+shift, off)
		}
	}
}

// No module defining a type of its own: no override, vmlinux as it is.
func TestShadowNothingShadowed(t *testing.T) {
	vmlinux, _, local := kernelAndOFED(t, 0)
	only := spec(t, &btf.Struct{Name: "ib_uqp_object_unrelated", Size: 8})
	target, shadowed, err := btfview.Shadow(vmlinux, []*btf.Spec{only}, local)
	if err != nil || target != nil || shadowed != nil {
		t.Fatalf("Shadow = %v, %v, %v; want nothing", target, shadowed, err)
	}
}
