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

// A part is one step of a probe, in instructions: what it costs is
// measured by attaching the floor plus that part (BenchmarkProbeParts).
type part struct {
	name  string
	insns func(ring int) asm.Instructions
}

// probeParts are the steps apmwatch's modify probe takes, one by one.
var probeParts = []part{
	{"ktime_get_boot_ns", func(int) asm.Instructions { return asm.Instructions{asm.FnKtimeGetBootNs.Call()} }},
	{"get_current_task_btf", func(int) asm.Instructions { return asm.Instructions{asm.FnGetCurrentTaskBtf.Call()} }},
	{"ringbuf_query", func(ring int) asm.Instructions {
		return asm.Instructions{asm.LoadMapPtr(asm.R1, ring), asm.Mov.Imm(asm.R2, 0), asm.FnRingbufQuery.Call()}
	}},
	{"ringbuf_reserve_submit", func(ring int) asm.Instructions {
		return asm.Instructions{
			asm.LoadMapPtr(asm.R1, ring), asm.Mov.Imm(asm.R2, 128), asm.Mov.Imm(asm.R3, 0),
			asm.FnRingbufReserve.Call(),
			asm.JEq.Imm(asm.R0, 0, "reserved"),
			asm.Mov.Reg(asm.R1, asm.R0), asm.Mov.Imm(asm.R2, 1), // BPF_RB_NO_WAKEUP
			asm.FnRingbufSubmit.Call(),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("reserved"),
		}
	}},
	{"probe_read_kernel_8", func(int) asm.Instructions {
		return asm.Instructions{
			asm.LoadMem(asm.R3, asm.R6, 0, asm.DWord), // the first argument: the QP
			asm.Mov.Reg(asm.R1, asm.RFP), asm.Add.Imm(asm.R1, -8), asm.Mov.Imm(asm.R2, 8),
			asm.FnProbeReadKernel.Call(),
		}
	}},
}

// floorHook is one attach point of a floor: a function (fentry or fexit)
// or a BTF tracepoint (tp_btf, by its name without the group).
type floorHook struct {
	name string
	at   ebpf.AttachType
}

func fentryAt(fn string) floorHook { return floorHook{fn, ebpf.AttachTraceFEntry} }
func fexitAt(fn string) floorHook  { return floorHook{fn, ebpf.AttachTraceFExit} }
func tpBTFAt(tp string) floorHook  { return floorHook{tp, ebpf.AttachTraceRawTp} }

// attachFloor attaches an empty program to each hook: the floor of a path
// whose probes sit on those hooks. The returned function detaches them.
func attachFloor(t testing.TB, hooks ...floorHook) func() {
	t.Helper()
	var detach []func()
	for _, h := range hooks {
		detach = append(detach, attachProg(t, h.name, h.at))
	}
	return func() {
		for _, d := range detach {
			d()
		}
	}
}

// attachProg attaches to fn (found in vmlinux or module BTF) a program of
// attach type at made of parts (none: the empty program). The returned
// function detaches it.
func attachProg(t testing.TB, fn string, at ebpf.AttachType, parts ...part) func() {
	t.Helper()
	var ring *ebpf.Map
	insns := asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)} // keep ctx
	for _, p := range parts {
		if ring == nil {
			var err error
			ring, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.RingBuf, MaxEntries: 64 << 20})
			if err != nil {
				t.Fatalf("ring buffer for the probe parts: %v", err)
			}
		}
		insns = append(insns, p.insns(ring.FD())...)
	}
	insns = append(insns, asm.Mov.Imm(asm.R0, 0), asm.Return())
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "parts",
		Type:         ebpf.Tracing,
		AttachType:   at,
		AttachTo:     fn,
		Instructions: insns,
		License:      "GPL",
	})
	if err != nil {
		t.Fatalf("loading a program for %s: %v", fn, err)
	}
	l, err := link.AttachTracing(link.TracingOptions{Program: prog})
	if err != nil {
		prog.Close()
		t.Fatalf("attaching a program to %s: %v", fn, err)
	}
	return func() {
		l.Close()
		prog.Close()
		if ring != nil {
			ring.Close()
		}
	}
}
