package event

import (
	"fmt"
	"strings"
)

// Blind names the APM signals no probe carries: a signal (Hook.Carries) is
// blind when none of its hooks is attached and at least one of them is in
// the kernel but failed to attach. A signal whose hooks the kernel lacks
// altogether (the module is not loaded: no QP of that kind can exist) is not
// blind. The model cannot judge what it cannot see, so a blind source is an
// error, never a healthy status (docs/events.md, "Blind").
func Blind(hooks []Hook) []BlindSignal {
	var out []BlindSignal
	idx := map[string]int{}
	covered := map[string]bool{}
	for _, h := range hooks {
		if h.Carries == "" {
			continue
		}
		switch h.Method {
		case HookFentry, HookKprobe, HookTracepoint:
			covered[h.Carries] = true
		}
	}
	for _, h := range hooks {
		if h.Carries == "" || !h.Failed || covered[h.Carries] {
			continue
		}
		i, ok := idx[h.Carries]
		if !ok {
			i = len(out)
			idx[h.Carries] = i
			out = append(out, BlindSignal{Signal: h.Carries})
		}
		out[i].Hooks = append(out[i].Hooks, h)
	}
	return out
}

// BlindSignal is one APM signal no probe carries, with the hooks that
// failed.
type BlindSignal struct {
	Signal string
	Hooks  []Hook
}

// maxBlindReason bounds one hook's reason in BlindError: verifier and BTF
// errors can be long.
const maxBlindReason = 300

// BlindError is a one-line error naming every blind signal, its failed
// hooks and why; nil when no signal is blind.
func BlindError(hooks []Hook) error {
	blind := Blind(hooks)
	if len(blind) == 0 {
		return nil
	}
	var parts []string
	for _, b := range blind {
		var hs []string
		for _, h := range b.Hooks {
			r := strings.Join(strings.Fields(h.Reason), " ")
			if len(r) > maxBlindReason {
				r = r[:maxBlindReason] + "..."
			}
			hs = append(hs, h.Name+": "+r)
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", b.Signal, strings.Join(hs, "; ")))
	}
	return fmt.Errorf("blind: no probe attached for %s", strings.Join(parts, ", "))
}
