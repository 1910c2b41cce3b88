package collector

import (
	"testing"

	"github.com/cilium/ebpf"
)

// ib_cm_notify's per-task storage is made only in the collection of the
// programs that use it: every other hook's collection leaves it out, so a
// kernel that cannot make it fails that one hook (referencedMaps).
func TestReferencedMapsKeepTaskStorageToItsHook(t *testing.T) {
	spec, err := loadApm()
	if err != nil {
		t.Fatal(err)
	}
	if m := spec.Maps["notify_calls"]; m == nil || m.Type != ebpf.TaskStorage {
		t.Fatalf("notify_calls: %+v, want a task storage map in the probes", m)
	}
	notify := referencedMaps(spec, []string{"fentry_notify", "fexit_notify"})
	if !notify["notify_calls"] || !notify["events"] {
		t.Errorf("ib_cm_notify's programs use %v, want notify_calls and events among them", notify)
	}
	modify := referencedMaps(spec, []string{"fexit_modify"})
	if modify["notify_calls"] || !modify["events"] {
		t.Errorf("fexit_modify uses %v, want events and not notify_calls", modify)
	}
	kprobes := referencedMaps(spec, []string{"kprobe_notify", "kretprobe_notify"})
	if kprobes["notify_calls"] || !kprobes["inflight"] {
		t.Errorf("the kprobe variant uses %v, want the inflight join, not notify_calls", kprobes)
	}
}
