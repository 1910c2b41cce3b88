package collector

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apmwatch/apmwatch/event"
)

// target is a hook with the attach method chosen for this kernel.
type target struct {
	def    hookDef
	method event.HookMethod
	reason string
	module string // where the kernel has it
	btf    bool   // fentry/fexit or tp_btf possible
	symbol string // kprobe symbol when not the plain name
	failed bool   // present, but no program attached (event.Hook.Failed)
	// unneeded: the method a fallback was planned with before the
	// primary made it unneeded (skipped), for when the primary fails.
	unneeded    event.HookMethod
	unneededWhy string
}

func (t target) kprobeSymbol() string {
	if t.symbol != "" {
		return t.symbol
	}
	return t.def.Name
}

func (t target) hook() event.Hook {
	h := t.def.describe(t.method, t.reason)
	h.Failed = t.failed
	if t.module != "" {
		h.Module = t.module // where it was found (a hookDef's AlsoIn)
	}
	return h
}

// reasonNoBTF: a function hooked with a kprobe because it has no BTF.
const reasonNoBTF = "no BTF for the function"

// planOptions change how targets are chosen.
type planOptions struct {
	ForceKprobe bool     // never use fentry/fexit or tp_btf (tests the fallback)
	EventHooks  []string // extra (struct ib_event *, void *) handlers: FUNC or MODULE:FUNC
	// RawEventHooks: extra mlx5-shaped raw event functions, MODULE:FUNC,
	// attached like mlx5_ib_qp_event (a fallback: only without
	// __ib_qp_event_handler).
	RawEventHooks []string
}

// plan chooses, for every hook, how to attach it on this kernel. It attaches
// nothing; the loader may still fall back from fentry to kprobe per hook.
func plan(k kernelView, defs []hookDef, opts planOptions) []target {
	defs = slices.Clone(defs)
	for _, spec := range opts.EventHooks {
		// A named handler is attached even when __ib_qp_event_handler
		// covers it; a known one keeps its definition. MODULE:FUNC names
		// the module it lives in (watched for loads like a known hook's).
		module, name, ok := strings.Cut(spec, ":")
		if !ok {
			module, name = "", spec
		}
		if i := slices.IndexFunc(defs, func(d hookDef) bool { return d.Name == name }); i >= 0 {
			defs[i].Role = roleAlways
			if defs[i].Module == "" {
				defs[i].Module = module
			}
			continue
		}
		defs = append(defs, qpEventHook(name, module, "qp async events, --event-hook", roleAlways))
	}
	for _, spec := range opts.RawEventHooks {
		module, name, _ := strings.Cut(spec, ":")
		if !slices.ContainsFunc(defs, func(d hookDef) bool { return d.Name == name }) {
			defs = append(defs, mlx5Hook(name, module, "qp async events, raw (mlx5 shape, qpn only), --raw-event-hook"))
		}
	}
	out := make([]target, 0, len(defs))
	for _, d := range defs {
		out = append(out, planOne(k, d, opts))
	}
	primary := slices.ContainsFunc(out, func(t target) bool {
		return t.def.Role == rolePrimary && t.method != event.HookMissing
	})
	for i := range out {
		t := &out[i]
		if t.def.Instead != "" && t.method != event.HookMissing && slices.ContainsFunc(out, func(o target) bool {
			return o.def.Name == t.def.Instead && o.method != event.HookMissing
		}) {
			t.method, t.reason = event.HookSkipped, "not needed: "+t.def.Instead+" is in this kernel"
		}
		if t.def.Role == roleCompanion && !primary && t.method != event.HookMissing {
			t.method, t.reason = event.HookSkipped, "not needed: without __ib_qp_event_handler the handlers it calls are hooked"
		}
		if t.def.Role == roleFallback && primary && t.method != event.HookMissing {
			t.unneeded, t.unneededWhy = t.method, t.reason
			t.method = event.HookSkipped
			t.reason = "not needed: __ib_qp_event_handler sees every QP event"
		}
		if t.def.Role == rolePrimary && t.method == event.HookMissing {
			t.reason += "; using the driver, uverbs and ULP handlers instead"
		}
	}
	return out
}

// unskip returns the fallbacks to attach after all because the primary
// QP-event hook failed to attach: their planned method is restored.
func unskip(targets []target) []int {
	if !slices.ContainsFunc(targets, func(t target) bool { return t.def.Role == rolePrimary && t.failed }) ||
		slices.ContainsFunc(targets, func(t target) bool { return t.def.Role == rolePrimary && t.method != event.HookMissing }) {
		return nil
	}
	var out []int
	for i := range targets {
		if t := &targets[i]; t.def.Role == roleFallback && t.method == event.HookSkipped && t.unneeded != "" {
			t.method, t.reason = t.unneeded, t.unneededWhy+" (__ib_qp_event_handler failed to attach)"
			out = append(out, i)
		}
	}
	return out
}

func planOne(k kernelView, d hookDef, opts planOptions) target {
	t := target{def: d, module: d.Module}
	if d.Kind == hookTracepoint {
		_, name := tpName(d.Name)
		present, hasBTF := k.HasTracepoint(d.Module, name)
		switch {
		case !present && !k.ModuleLoaded(d.Module):
			t.method, t.reason = event.HookMissing, fmt.Sprintf("module %s not loaded", d.Module)
		case !present:
			t.method, t.reason = event.HookMissing, "tracepoint not in this kernel"
		case hasBTF && !opts.ForceKprobe:
			t.method, t.reason, t.btf = event.HookTracepoint, "tp_btf", true
		default:
			t.method, t.reason = event.HookTracepoint, "raw_tp (no BTF for the tracepoint)"
			if opts.ForceKprobe {
				t.reason = "raw_tp (forced)"
			}
		}
		return t
	}
	all := k.FuncModules(d.Name)
	mods := all
	if d.Module != "" {
		mods = slices.DeleteFunc(slices.Clone(all), func(m string) bool { return m != d.Module && !slices.Contains(d.AlsoIn, m) })
	}
	switch {
	case len(mods) == 0 && d.Module != "" && !k.ModuleLoaded(d.Module):
		t.method, t.reason = event.HookMissing, fmt.Sprintf("module %s not loaded", d.Module)
		return t
	case len(mods) == 0:
		t.method, t.reason = event.HookMissing, "not in kallsyms (inlined, renamed or absent on this kernel)"
		return t
	case len(mods) > 1:
		t.method, t.reason = event.HookMissing, "name not unique: in "+strings.Join(mods, ", ")
		return t
	}
	t.module = mods[0]
	if len(all) > 1 {
		// fentry cannot name the module; a kprobe can ("module:function").
		t.method, t.symbol = event.HookKprobe, t.module+":"+d.Name
		t.reason = "name also in " + strings.Join(slices.DeleteFunc(slices.Clone(all), func(m string) bool { return m == t.module }), ", ") + ": kprobe on " + t.symbol
		return t
	}
	hasBTF := k.HasBTFFunc(t.module, d.Name)
	switch {
	case opts.ForceKprobe:
		t.method, t.reason = event.HookKprobe, "forced"
	case hasBTF && (d.Fentry != "" || d.Fexit != ""):
		t.method, t.btf = event.HookFentry, true
	default:
		t.method, t.reason = event.HookKprobe, reasonNoBTF
	}
	return t
}
