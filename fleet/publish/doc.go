// Package publish is the host side of the fleet: what `apmwatch audit
// --publish` runs on every compute node. The tracker (tracker.go, with
// the port addresses from sysfs.go) turns the audit's events into
// connection records, one per end of an RC/UC connection; the Publisher
// (publish.go, publish_backlog.go) sends them and the host's finding
// lines to NATS JetStream through a bounded on-disk queue (queue.go; its
// eviction past the bound, connection records before finding lines, in
// queue_evict.go; its recovery after a crash in queue_recover.go), with
// a heartbeat straight to the stream (pubheartbeat.go) and its metrics
// (pubmetrics.go).
//
// Data flows host -> NATS -> judge -> finding line: this package is the
// first arrow. It writes what fleet/wire defines through fleet/natsconn.
//
// It is not the judge: it never imports the fleet's engine (fleet), nor
// the embedded server (fleet/natsserver), and the judge never imports it
// (internal/layering). A change to the judge neither rebuilds nor
// retests it.
package publish
