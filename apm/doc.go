// Package apm is the per-QP model of InfiniBand Automatic Path Migration
// (IBTA vol. 1, "Automatic Path Migration") and the detectors that turn the
// decoded events of package event into findings.
//
// It is pure: no BPF, no I/O, no wall clock. Time comes from the events'
// CLOCK_BOOTTIME stamps and from explicit Advance calls.
//
// APM in four lines:
//   - an RC/UC QP has a primary path and may have an alternate path, and a
//     path-migration state: MIGRATED (no armed alternate), REARM (software
//     asked to arm), ARMED (the HCA will fail over to the alternate);
//   - ARMED -> MIGRATED happens in hardware when the primary fails: the HCA
//     swaps to the alternate and raises PATH_MIG (PATH_MIG_ERR if that fails);
//   - after that there is no valid alternate, so software must, on each side:
//     (1) send a LAP with a new alternate path, (2) load it (modify RTS->RTS
//     with IB_QP_ALT_PATH), (3) rearm (IB_QP_PATH_MIG_STATE=REARM);
//   - REARM turns ARMED only when a packet with MigReq=0 arrives from the
//     peer, so both sides must rearm and traffic must flow.
//
// Each QP history is keyed by (device, qpn, generation). The span from a
// migration (a PATH_MIG event, or a successful modify that forces
// PATH_MIG_STATE=MIGRATED) to the rearm that closes it is an episode; most
// findings are judgements on one episode. Only successful modifies change the
// model; failed ones are kept as evidence.
//
// Events are ordered by their Boot stamp within Config.ReorderWindow before
// the model sees them, because the per-CPU streams of a source interleave
// slightly out of order. Deadlines fire in the same timeline: a deadline that
// falls before an event is judged before that event is applied.
package apm
