package wire

import (
	"strings"
	"time"
)

// A heartbeat says a host is there, and how far what it published has
// reached the stream. The publisher sends one every HeartbeatEvery on its
// heartbeat subject, straight to JetStream (not through its queue): a
// heartbeat late is worth nothing. It is additive: older fleets and
// readers filter on the partitions' subjects and never see it.
//
//	apmwatch.conn.hb.<host>.hb.0
//
// The subject is in APMWATCH_CONN, so that an instance consumes a host's
// heartbeats and its records in the one order the stream stored them, and
// of the shape of a host's own record subjects (apmwatch.conn.*.<host>.*.*),
// so that the permissions `apmwatch fleet add-host` gives a host allow it.

// Heartbeat is the heartbeat record (JSON; the field names are an
// interface, fields are only added).
type Heartbeat struct {
	Host string    `json:"host"`
	Run  string    `json:"run"` // the publisher's run, as in its records
	At   time.Time `json:"at"`  // the host's clock when it sent it
	// Queued is how many messages the host had queued and not yet seen
	// acknowledged when it sent the heartbeat: 0 says that all it queued
	// before is in the stream, before the heartbeat.
	Queued uint64 `json:"queued"`
	// Every is the host's heartbeat period, seconds.
	Every float64 `json:"every"`
}

// DefaultHeartbeatEvery is how often a publisher sends its heartbeat.
const DefaultHeartbeatEvery = 10 * time.Second

// Bounds of a heartbeat read from the stream (hostile input).
const (
	MaxHeartbeatBytes = 1 << 10
	MaxRunLen         = 128
)

const (
	HeartbeatPrefix = ConnPrefix + "hb."
	HeartbeatFilter = HeartbeatPrefix + "*.hb.0"
)

// HeartbeatSubject is where a host's heartbeats go.
func HeartbeatSubject(host string) string { return HeartbeatPrefix + Token(host) + ".hb.0" }

// ParseHeartbeatSubject returns the host token of a heartbeat subject.
func ParseHeartbeatSubject(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, HeartbeatPrefix)
	if !ok {
		return "", false
	}
	host, ok := strings.CutSuffix(rest, ".hb.0")
	return host, ok && isToken(host)
}

// IsHeartbeat reports a heartbeat subject (it has the prefix).
func IsHeartbeat(subject string) bool { return strings.HasPrefix(subject, HeartbeatPrefix) }
