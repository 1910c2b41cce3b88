//go:build labguest

// The floor any probe pays: an empty BTF program (fentry or fexit) on a
// kernel function, built from two instructions (r0 = 0; exit), so no
// compiler is needed. Its cost is the trampoline and the program call.
package guest

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// attachEmpty attaches an empty fentry (exit false) or fexit (exit true)
// program to fn, found in vmlinux or module BTF; the returned function
// detaches it.
func attachEmpty(t testing.TB, fn string, exit bool) func() {
	t.Helper()
	at := ebpf.AttachTraceFEntry
	if exit {
		at = ebpf.AttachTraceFExit
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "empty",
		Type:         ebpf.Tracing,
		AttachType:   at,
		AttachTo:     fn,
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		License:      "GPL",
	})
	if err != nil {
		t.Fatalf("loading an empty program for %s: %v", fn, err)
	}
	l, err := link.AttachTracing(link.TracingOptions{Program: prog})
	if err != nil {
		prog.Close()
		t.Fatalf("attaching an empty program to %s: %v", fn, err)
	}
	return func() {
		l.Close()
		prog.Close()
	}
}
