// Package fleet is the judge of the fleet: it sees both ends of every
// connection, live, over NATS JetStream (docs/fleet.md). On each host
// `apmwatch audit --publish` turns its events into connection records
// (wire.Conn: one end of an RC/UC connection, its addresses and APM
// state) and publishes them with its finding lines through a bounded
// on-disk queue (fleet/publish). An `apmwatch fleet` instance, this
// package, consumes the records of its partitions, pairs the two ends of
// each connection (Engine, by the connid identity rule: the local
// address and QPN of one are the remote address and QPN of the other,
// both ways) and judges the pair:
// one-sided-rearm and unprotected-connection, with both hosts' evidence,
// on the stream's clock once both hosts published past the deadline;
// and on each host's heartbeat: host-silent. It also answers `apmwatch
// fleet status` and reads the history behind `postmortem --nats`. It
// runs on the fleet's machine (or machines: one instance each).
//
// Data flows host -> NATS -> judge -> finding line, one package a role:
//
//	fleet/publish     the host side: tracker, publisher, heartbeat, on-disk queue
//	fleet/wire        the protocol both sides speak: records, subjects, heartbeats
//	fleet/natsconn    the NATS client options, denials and stream reads both sides use
//	fleet/natsserver  the NATS server `apmwatch fleet` embeds, its users and add-host
//	fleet             the judge: engine, slab and index, clock and merge, trust,
//	                  tombstones, silent hosts, shares, leases, takeover, fence,
//	                  status, history
//
// The judge never imports fleet/publish, nor the host side the judge
// (internal/layering).
//
// Subjects (one stream each, created by whoever connects first):
//
//	apmwatch.conn.<partition>.<host>.<device>.<qpn>   stream APMWATCH_CONN
//	apmwatch.conn.hb.<host>.hb.0                      stream APMWATCH_CONN (heartbeats)
//	apmwatch.finding.host.<host>                      stream APMWATCH_FINDINGS
//	apmwatch.finding.fleet.<partition>                stream APMWATCH_FINDINGS
//
// The partition is a stable hash of the connection (both ends compute
// the same one), so one instance holds both ends of a connection. With
// several instances each is the home of a share of the partitions and
// holds the shares it judges under leases in the KV bucket
// APMWATCH_LEASES: an instance adopts the share of one that
// stopped and hands it back when its home returns. A finding line is
// written only once the findings stream acknowledged it as new (the fence):
// whoever judges it, it is written once.
package fleet
