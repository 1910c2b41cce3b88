package event

import (
	"strings"
	"testing"
)

// A signal is blind when none of its hooks attached and one of them failed;
// a signal whose hooks the kernel lacks is not.
func TestBlind(t *testing.T) {
	const user, events = "qp modify, user QPs", "qp async events"
	attached := func(name, carries string) Hook { return Hook{Name: name, Method: HookFentry, Carries: carries} }
	failed := func(name, carries, why string) Hook {
		return Hook{Name: name, Method: HookMissing, Failed: true, Reason: why, Carries: carries}
	}
	absent := func(name, carries string) Hook {
		return Hook{Name: name, Method: HookMissing, Reason: "module x not loaded", Carries: carries}
	}
	for _, tc := range []struct {
		name  string
		hooks []Hook
		blind []string // signals, in order
	}{
		{"every hook attached", []Hook{attached("ib_modify_qp_with_udata", user), attached("__ib_qp_event_handler", events)}, nil},
		{"a failed hook another covers", []Hook{failed("__ib_qp_event_handler", events, "fentry failed"),
			attached("ib_uverbs_qp_event_handler", events)}, nil},
		{"a signal whose module is not loaded", []Hook{attached("ib_modify_qp_with_udata", user), absent("ib_cm_notify", "cm notify")}, nil},
		{"a failed hook that carries nothing the model needs", []Hook{{Name: "ib_device_rename", Method: HookMissing, Failed: true}}, nil},
		{"a skipped fallback is no cover", []Hook{failed("__ib_qp_event_handler", events, "kprobe failed"),
			{Name: "ib_uverbs_qp_event_handler", Method: HookSkipped, Carries: events}}, []string{events}},
		{"the modify hook failed", []Hook{failed("ib_modify_qp_with_udata", user, "fentry failed: no BTF; kprobe failed: invalid func"),
			attached("__ib_qp_event_handler", events)}, []string{user}},
		{"everything failed", []Hook{failed("ib_modify_qp_with_udata", user, "a"), failed("__ib_qp_event_handler", events, "b"),
			failed("ib_uverbs_qp_event_handler", events, "c")}, []string{user, events}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Blind(tc.hooks)
			var names []string
			for _, b := range got {
				names = append(names, b.Signal)
			}
			if strings.Join(names, "|") != strings.Join(tc.blind, "|") {
				t.Fatalf("blind %q, want %q", names, tc.blind)
			}
			err := BlindError(tc.hooks)
			if (err != nil) != (len(tc.blind) > 0) {
				t.Fatalf("error %v, want one: %v", err, len(tc.blind) > 0)
			}
			if err == nil {
				return
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") || msg != strings.ToLower(msg[:1])+msg[1:] {
				t.Errorf("not a one-line lowercase error: %q", msg)
			}
			for _, b := range got {
				for _, h := range b.Hooks {
					if !strings.Contains(msg, h.Name) || !strings.Contains(msg, h.Reason) {
						t.Errorf("%q does not name %s and why (%s)", msg, h.Name, h.Reason)
					}
				}
			}
		})
	}
	long := failed("ib_modify_qp", "qp modify, kernel QPs", strings.Repeat("verifier line\n", 1000))
	if err := BlindError([]Hook{long}); len(err.Error()) > 1000 || strings.Contains(err.Error(), "\n") {
		t.Errorf("a long reason is not bounded to one short line: %d bytes", len(err.Error()))
	}
}
