// Package fleettest is the fleet's test kit, imported by the tests of
// fleet and fleet/publish (and other test kits) only, never by the
// product (internal/layering): the NATS a test runs against (an
// embedded server, or a 3-node cluster of nats-server processes with
// APMWATCH_FLEET_NATS=cluster) and reading its streams (nats.go,
// cluster.go, stream.go), servers with users and TLS (auth.go, tls.go),
// and connection records to feed (conn.go).
//
// It imports neither the judge (fleet) nor fleet/publish, so that the
// tests of both may use it.
package fleettest
