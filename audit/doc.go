// Package audit is the `apmwatch audit` daemon: it runs the live probes and
// the APM model for as long as the host runs and turns what they see into
// outputs a fleet can use.
//
// Data flows one way, as everywhere in apmwatch:
//
//	source (collector) -> loop -> apm.Model -> findings
//	                        |          |-> finding log (JSON lines)
//	                        |          |-> metrics (Prometheus)
//	                        |          |-> incident bundles
//	                        |          `-> Actor (optional: the actuator)
//	                        `-> flight recorder (raw events, rotated)
//	rdma netlink snapshots -> loop -> apm.Model.Truth / Gone
//
// One goroutine (the loop, loop.go) owns the model, the finding log, the
// recorder and the open-findings table; the source reader, the netlink
// reader and the bundle writer run beside it and talk to it over channels.
//
// Files: config.go (options and their checks), actor.go (the actuator's
// extension point), loop.go (the run loop), source.go (opening and
// re-opening the probes), modules.go (noticing ib modules reloaded),
// findlog.go (the finding log and its line schema), metrics.go,
// recorder.go (the flight recorder), bundle.go (incident bundles),
// reconcile.go (rdma netlink ground truth). docs/audit.md is the user's view.
package audit
