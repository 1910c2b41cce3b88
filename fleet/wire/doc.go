// Package wire is the fleet's protocol: what a host publishes and an
// `apmwatch fleet` instance reads, and nothing that moves it. Data flows
// host -> NATS -> judge -> finding line; this package is the shape of
// the middle arrow, compiled into both ends.
//
// It holds the connection record (Conn, EndKey, Partitions and the
// partition both ends compute alike) in record.go, the stream names,
// subjects and subject tokens (ConnSubject, OwnSubject,
// ParseConnSubject, the KV bucket of the leases) in subjects.go, and the
// host's heartbeat record and subject in heartbeat.go, with the bounds
// both sides agree on (MaxRecordBytes, MaxTracked).
//
// It is not a NATS client (fleet/natsconn), not the publisher
// (fleet/publish) nor the judge (fleet): it imports only the standard
// library, and no NATS package (internal/layering). Field names of the
// records are an interface: fields are only added.
package wire
