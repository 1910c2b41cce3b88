// Package apm is the per-QP model of InfiniBand Automatic Path Migration
// (IBTA vol. 1, "Automatic Path Migration") and the rules that turn the
// decoded events of package event into findings.
//
// It is pure: no BPF, no I/O, no wall clock. Time comes from the events'
// CLOCK_BOOTTIME stamps and from explicit Advance and Finish calls.
//
// APM in five lines (IBTA, and rdmavt's hfi1/qib, whose APM is in source):
//   - an RC/UC/XRC QP has a primary path and may have an alternate path,
//     and a path-migration state: MIGRATED (no armed alternate), REARM
//     (software asked to arm), ARMED (the HCA will fail over);
//   - a requester learns its primary is dead only when an outstanding
//     request runs out of retries ((retry_cnt+1) x 4.096 us x 2^timeout:
//     0.5 s to about a minute; an idle QP never learns). ARMED then: it
//     migrates blindly and raises PATH_MIG; not ARMED: RETRY_EXC_ERR and
//     ERR, no async event. The responder migrates on the first MigReq=1
//     packet on its alternate. A dead alternate fails the same way later
//     (a firmware may raise PATH_MIG_ERR instead);
//   - a migration copies: primary := alternate, the alternate stays, so
//     there is no fresh alternate and software must, on each side: (1) send
//     a LAP with a new alternate path, (2) load it (modify RTS->RTS with
//     IB_QP_ALT_PATH), (3) rearm (IB_QP_PATH_MIG_STATE=REARM); a rearm
//     without (2) arms onto the path the QP runs on;
//   - REARM turns ARMED only when a packet with MigReq=0 arrives from the
//     peer (responses count), so both sides must rearm and traffic must flow;
//   - COMM_EST exists only for the first packet received in RTR.
//
// Each QP history is keyed by (device, qpn, generation). The span from a
// migration (a PATH_MIG event on an armed QP, or a successful modify that
// forces PATH_MIG_STATE=MIGRATED) to the rearm that closes it is an
// episode; most findings are judgements on one episode. Only successful
// modifies change the model; failed ones are kept as evidence.
//
// Everything enters one way, Handle: probe events and ground-truth readings
// (event.KindTruth) alike. Events are ordered by their Boot stamp within
// Config.ReorderWindow before the model sees them, because the per-CPU
// streams of a source interleave slightly out of order; an input older than
// that is counted late and judged at its own stamp. Deadlines fire in the
// same timeline, each at its own time. Every stream ends with Finish.
//
// Where each rule is decided (one file per finding kind, named like its
// test; machine.go holds the transitions that call them, qpevent.go, cm.go
// and truth.go the inputs that enter them, steps.go the alternate loads and
// rearms, calls.go the modifies in progress whose entry judges them,
// forced.go forced migrations):
//
//	kind                         file
//	missed-rearm                 missed_rearm.go
//	rearm-without-new-alternate  rearm_alt.go
//	lap-race                     lap_race.go
//	mig-state-mismatch           mismatch.go
//	migration-error              migration_error.go
//	flapping                     flapping.go
//	apm-modify-failed            modify_failed.go
//	never-armed                  never_armed.go
//	cm-not-notified              cm_notify.go
//	stuck-rearm                  stuck_rearm.go
//	unprotected-failure          unprotected_failure.go
//
// kinds.go is the one registry of finding kinds (also those of the pairing
// of two recordings and of the actuator); ids.go the one finding-ID
// allocator. The rest: model.go (Model: Handle, Advance, Finish, Stats),
// config.go (every threshold, DefaultConfig), finding.go (Finding,
// Severity, Key), emit.go (filling and handing out a finding), qp.go (what
// the model keeps of one QP), store.go (the QPs in chunked slabs),
// reorder.go (the reorder stage), timers.go (the deadlines' heap), loss.go
// (stretches of missing records, and of time nobody watched), restore.go
// (a restarted daemon's findings under their earlier IDs). docs/findings.md states each rule, the
// evidence that is enough for it, and what is never reported.
package apm
