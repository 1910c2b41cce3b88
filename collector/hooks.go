package collector

import (
	"strings"

	"github.com/apmwatch/apmwatch/event"
)

// hookKind says which programs a hook needs.
type hookKind uint8

const (
	hookFunc       hookKind = iota // a function: fentry and/or fexit, else kprobe and/or kretprobe
	hookTracepoint                 // tp_btf, else raw_tp
)

// role orders QP-event hooks: fallbacks are attached only when the primary
// hook is missing.
type role uint8

const (
	roleAlways    role = iota
	rolePrimary        // __ib_qp_event_handler
	roleFallback       // driver, uverbs and kernel ULP handlers
	roleCompanion      // attached only with the primary: what it does not see (XRC target QPs)
)

// hookDef is one probe target and the programs (names in the collection
// spec) that implement it.
type hookDef struct {
	Name   string // function, or tracepoint "group:name"
	Module string // where it is expected to live
	// AlsoIn: modules it lives in on some kernels instead (the module
	// then shown is the one it was found in).
	AlsoIn []string
	Signal string // what it observes
	Kind   hookKind
	Role   role
	// Carries: the APM signal the model cannot do without that this hook
	// carries (event.Blind); "" for the others.
	Carries string
	// Instead: the hook this one stands in for, attached only when that
	// one is not in the kernel (an older ib_core's name for a function).
	Instead string
	// Function hooks: BTF programs, then kprobe programs; an entry and an
	// exit program of one kind are joined in the kernel (join map).
	Fentry, Fexit, Kprobe, Kretprobe string
	// Tracepoint hooks.
	TPBTF, RawTP string
}

// QPEventHandlerProgs are the programs for any (struct ib_event *, void *)
// handler; --event-hook adds targets using them.
// The signals without which the model is blind (event.Blind).
const (
	carriesModifyKernel = "qp modify, kernel QPs"
	carriesModifyUser   = "qp modify, user QPs"
	carriesQPEvents     = "qp async events"
	carriesCMNotify     = "cm notify"
)

func qpEventHook(name, module, signal string, r role) hookDef {
	return hookDef{Name: name, Module: module, Signal: signal, Kind: hookFunc, Role: r, Carries: carriesQPEvents,
		Fentry: "fentry_qp_event", Kprobe: "kprobe_qp_event"}
}

// mlx5Hook is a raw driver event function (struct mlx5_core_qp *, int
// type): a fallback, attached only without __ib_qp_event_handler.
func mlx5Hook(name, module, signal string) hookDef {
	return hookDef{Name: name, Module: module, Signal: signal, Kind: hookFunc, Carries: carriesQPEvents,
		Role: roleFallback, Fentry: "fentry_mlx5_qp_event", Kprobe: "kprobe_mlx5_qp_event"}
}

func modifyHook(name, signal, carries string) hookDef {
	// fentry keeps the entry stamp and announces an APM modify; fexit sees
	// arguments and return code. kprobes join the record in the kernel.
	return hookDef{Name: name, Module: "ib_core", Signal: signal, Kind: hookFunc, Carries: carries,
		Fentry: "fentry_modify", Fexit: "fexit_modify", Kprobe: "kprobe_modify", Kretprobe: "kretprobe_modify"}
}

// uverbsModifyHook is a uverbs modify command: an APM modify it refuses
// before the verbs layer (bpf/uverbs.bpf.h).
func uverbsModifyHook(name string) hookDef {
	return hookDef{Name: name, Module: "ib_uverbs", Signal: "qp modify refused by ib_uverbs, user QPs", Kind: hookFunc,
		Fexit: "fexit_uverbs_modify", Kprobe: "kprobe_uverbs_modify", Kretprobe: "kretprobe_uverbs_modify"}
}

func handlerHook(name, signal string) hookDef {
	return hookDef{Name: name, Module: "ib_cm", Signal: signal, Kind: hookFunc,
		Fentry: "fentry_handler", Fexit: "fexit_handler", Kprobe: "kprobe_handler", Kretprobe: "kretprobe_handler"}
}

func createHook(name, signal string) hookDef {
	return hookDef{Name: name, Module: "ib_core", Signal: signal, Kind: hookFunc,
		Fexit: "fexit_qp_create", Kretprobe: "kretprobe_qp_create"}
}

func tpHook(name, module, signal, btfProg, rawProg string) hookDef {
	return hookDef{Name: name, Module: module, Signal: signal, Kind: hookTracepoint, TPBTF: btfProg, RawTP: rawProg}
}

// defaultHooks is every hook apmwatch knows, in display order: functions
// and tracepoints of the kernel and its drivers and ULPs. Any other handler
// (a test module's) is added with --event-hook.
func defaultHooks() []hookDef {
	return []hookDef{
		modifyHook("ib_modify_qp", "qp modify, kernel ULP QPs", carriesModifyKernel),
		modifyHook("ib_modify_qp_with_udata", "qp modify, user QPs", carriesModifyUser),
		uverbsModifyHook("ib_uverbs_modify_qp"),
		uverbsModifyHook("ib_uverbs_ex_modify_qp"),
		qpEventHook("__ib_qp_event_handler", "ib_core", "qp async events, every QP (>= 6.11)", rolePrimary),
		// An XRC target QP's events go to __ib_shared_qp_event_handler,
		// which replaces __ib_qp_event_handler as its handler and calls
		// each process's opened QP's own (verbs.c): beside the primary,
		// whose fallbacks are skipped, this is where they are seen. Below
		// 6.11 the uverbs and ULP handlers it calls are hooked anyway.
		qpEventHook("__ib_shared_qp_event_handler", "ib_core", "qp async events, XRC target QPs (>= 6.11)", roleCompanion),
		qpEventHook("ib_uverbs_qp_event_handler", "ib_uverbs", "qp async events, user QPs", roleFallback),
		mlx5Hook("mlx5_ib_qp_event", "mlx5_ib", "qp async events, mlx5 (raw, qpn only)"),
		{Name: "mlx4_ib_qp_event", Module: "mlx4_ib", Signal: "qp async events, mlx4 (raw, qpn only)", Kind: hookFunc, Carries: carriesQPEvents,
			Role: roleFallback, Fentry: "fentry_mlx4_qp_event", Kprobe: "kprobe_mlx4_qp_event"},
		qpEventHook("qp_event_handler", "rpcrdma", "qp async events, NFS/RDMA server", roleFallback),
		qpEventHook("rds_ib_qp_event_handler", "rds_rdma", "qp async events, RDS", roleFallback),
		qpEventHook("srp_qp_event", "ib_srp", "qp async events, SRP initiator", roleFallback),
		qpEventHook("srpt_qp_event", "ib_srpt", "qp async events, SRP target", roleFallback),
		qpEventHook("iser_qp_event_callback", "ib_iser", "qp async events, iSER initiator", roleFallback),
		qpEventHook("isert_qp_event_callback", "ib_isert", "qp async events, iSER target", roleFallback),
		qpEventHook("ipoib_cm_rx_event_handler", "ib_ipoib", "qp async events, IPoIB-CM", roleFallback),
		// Port and device events as the driver reports them: the HCA's
		// driver calls ib_dispatch_event, which queues a work item on ib_wq
		// (cache.c) that updates the port cache and only then calls
		// ib_dispatch_event_clients. Stamped at the clients, a PORT_ERR can
		// come after the deaths of the QPs its port failure killed (a busy
		// ib_wq, a slow port query in the cache update). GID_CHANGE alone
		// reaches the clients without ib_dispatch_event (the GID cache
		// dispatches it): taken there, and only there. (MLNX_OFED 4.9 has
		// no ib_dispatch_event_clients: its GID_CHANGE is not shown.)
		{Name: "ib_dispatch_event", Module: "ib_core", Signal: "port and device events", Kind: hookFunc,
			Fentry: "fentry_port_event", Kprobe: "kprobe_port_event"},
		{Name: "ib_dispatch_event_clients", Module: "ib_core", Signal: "GID_CHANGE from the GID cache", Kind: hookFunc,
			Fentry: "fentry_gid_event", Kprobe: "kprobe_gid_event"},
		{Name: "ib_cm_notify", Module: "ib_cm", Signal: "cm notify (migrate, establish) and its result", Kind: hookFunc, Carries: carriesCMNotify,
			Fentry: "fentry_notify", Fexit: "fexit_notify", Kprobe: "kprobe_notify", Kretprobe: "kretprobe_notify"},
		handlerHook("cm_lap_handler", "LAP received by the CM, and its result"),
		handlerHook("cm_apr_handler", "APR received by the CM, and its result"),
		tpHook("ib_mad:ib_mad_ib_send_mad", "ib_core", "CM MADs sent", "tp_mad_send", "raw_mad_send"),
		tpHook("ib_mad:ib_mad_recv_done_handler", "ib_core", "CM MADs received", "tp_mad_recv", "raw_mad_recv"),
		tpHook("ib_umad:ib_umad_write", "ib_umad", "MADs written by userspace (marks sends)", "tp_umad_write", "raw_umad_write"),
		createHook("ib_create_qp_user", "qp create, user QPs"),
		createHook("ib_create_qp_kernel", "qp create, kernel QPs"),
		{Name: "ib_destroy_qp_user", Module: "ib_core", Signal: "qp destroy, every QP", Kind: hookFunc,
			Fentry: "fentry_destroy", Fexit: "fexit_destroy", Kprobe: "kprobe_destroy", Kretprobe: "kretprobe_destroy"},
		{Name: "ib_register_device", Module: "ib_core", Signal: "device names: a device registered", Kind: hookFunc,
			Fexit: "fexit_dev_register"},
		{Name: "ib_device_rename", Module: "ib_core", Signal: "device names: a device renamed", Kind: hookFunc,
			Fexit: "fexit_dev_rename", Kprobe: "kprobe_dev_rename"},
	}
}

// tpName splits "group:name".
func tpName(n string) (group, name string) {
	for i := 0; i < len(n); i++ {
		if n[i] == ':' {
			return n[:i], n[i+1:]
		}
	}
	return "", n
}

func (h hookDef) describe(m event.HookMethod, reason string) event.Hook {
	return event.Hook{Name: h.Name, Module: h.Module, Signal: h.Signal, Method: m, Reason: reason, Carries: h.Carries}
}

// symbolNames is every kallsyms name planning may ask about for defs and
// the extra event hooks: functions by name, tracepoints by their name
// without the group.
func symbolNames(defs []hookDef, eventHooks []string) map[string]bool {
	out := make(map[string]bool, len(defs)+len(eventHooks))
	for _, d := range defs {
		if d.Kind == hookTracepoint {
			_, n := tpName(d.Name)
			out[n] = true
			continue
		}
		out[d.Name] = true
	}
	for _, spec := range eventHooks {
		_, name, ok := strings.Cut(spec, ":")
		if !ok {
			name = spec
		}
		out[name] = true
	}
	return out
}

// HookModules names the modules apmwatch's hooks live in, in display
// order (apmwatch btf gen writes their BTF).
func HookModules() []string { return hookModules(defaultHooks()) }
