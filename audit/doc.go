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
// Files: main.go (Main: signals, the finding log reopened on SIGHUP),
// config.go (options and their checks), deps.go (the daemon's connections
// to the system), actor.go (the actuator's extension point), sink.go (a
// copy of the stream for a publisher), loop.go (the run loop), wake.go
// (waking when the model's next deadline falls due), source.go (opening
// and re-opening the probes), modules.go (noticing ib modules reloaded),
// outputs.go (each finding to the log, the metrics, the bundles and the
// actor), findlog.go (the finding log and its line schema), metrics.go,
// recorder.go (the flight recorder), incidents.go and bundle.go (gathering
// and writing incident bundles), reconcile.go (rdma netlink ground truth),
// restore.go and restore_log.go (a restart rebuilding what the earlier
// runs left open, from the flight recorder and the finding log).
// docs/audit.md is the user's view.
package audit
