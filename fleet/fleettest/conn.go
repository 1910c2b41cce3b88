package fleettest

import (
	"time"

	"github.com/apmwatch/apmwatch/fleet/wire"
)

// T0 is when the records of the engine tests are dated.
var T0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// Conn builds a record of one end: LID-routed in subnet fe80::, local
// LID and QPN, remote LID and QPN.
func Conn(host string, lid uint16, qpn uint32, rlid uint16, rqpn uint32) wire.Conn {
	return wire.Conn{Host: host, Device: "ibsim0", Port: 1, Type: "RC", Local: wire.Addr{GID: "fe80::1", LID: lid, QPN: qpn},
		Remote: wire.Addr{LID: rlid, QPN: rqpn}, APM: true, Armed: true, Changed: T0, At: T0, Rev: 1}
}

// Migrated is c after a path migration at at: disarmed, a new episode.
func Migrated(c wire.Conn, at time.Time) wire.Conn {
	c.Armed, c.Changed, c.At, c.Rev = false, at, at, c.Rev+1
	c.Episode = wire.Episode{N: c.Episode.N + 1, Migrations: []time.Time{at}}
	c.Mig = "MIGRATED"
	return c
}

// Rearmed is c rearmed at at.
func Rearmed(c wire.Conn, at time.Time) wire.Conn {
	c.Armed, c.Changed, c.At, c.Rev = true, at, at, c.Rev+1
	c.Episode.Rearm = at
	return c
}

// Base is when the records of a test in the streams were published: an
// hour ago (a stream's records are from the past).
var Base = time.Now().Add(-time.Hour).UTC().Truncate(time.Second)

// Dated moves a record of the engine tests (dated T0) to Base.
func Dated(c wire.Conn) wire.Conn {
	c.At, c.Changed = Base.Add(c.At.Sub(T0)), Base.Add(c.Changed.Sub(T0))
	return c
}
