package fleet

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apmwatch/apmwatch/apm"
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
	maxHeartbeatBytes = 1 << 10
	maxRunLen         = 128
)

const (
	heartbeatPrefix = connPrefix + "hb."
	heartbeatFilter = heartbeatPrefix + "*.hb.0"
)

// HeartbeatSubject is where a host's heartbeats go.
func HeartbeatSubject(host string) string { return heartbeatPrefix + token(host) + ".hb.0" }

// parseHeartbeatSubject returns the host token of a heartbeat subject.
func parseHeartbeatSubject(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, heartbeatPrefix)
	if !ok {
		return "", false
	}
	host, ok := strings.CutSuffix(rest, ".hb.0")
	return host, ok && isToken(host)
}

// isHeartbeat reports a heartbeat subject (it has the prefix).
func isHeartbeat(subject string) bool { return strings.HasPrefix(subject, heartbeatPrefix) }

// decodeHeartbeat checks a heartbeat against its subject.
func decodeHeartbeat(r Received) (Heartbeat, string, refuseReason) {
	var hb Heartbeat
	if len(r.Data) > maxHeartbeatBytes {
		return hb, "", refusedTooLarge
	}
	host, ok := parseHeartbeatSubject(r.Subject)
	if !ok {
		return hb, "", refusedBadSubject
	}
	if decodeJSON(r.Data, &hb) != nil || hb.At.IsZero() || len(hb.Run) > maxRunLen || !utf8.ValidString(hb.Run) {
		return hb, "", refusedUndecodable
	}
	if token(hb.Host) != host {
		return hb, "", refusedMismatch
	}
	return hb, host, nRefusals
}

// TakeHeartbeat applies a heartbeat as the stream delivered it: the
// stream's clock, the host's latest heartbeat and clock offset, and its
// watermark when its queue was empty. It returns why it refused it ("":
// it did not). A heartbeat dated more than MaxSkew after its receipt is
// refused as a record is.
func (g *Engine) TakeHeartbeat(r Received, now time.Time) string {
	hb, host, why := decodeHeartbeat(r)
	if why != nRefusals {
		return g.refuse(why)
	}
	receipt := r.Stored
	if receipt.IsZero() {
		receipt = now
	}
	if hb.At.After(receipt.Add(g.cfg.MaxSkew)) {
		return g.refuse(refusedFuture)
	}
	g.receivedAt(receipt.UnixNano())
	id := g.names.id(host)
	h := g.host(id)
	if h == nil {
		return ""
	}
	rn := receipt.UnixNano()
	if rn >= h.beat {
		h.beat, h.beatAt, h.offset, h.run = rn, hb.At.UnixNano(), hb.At.Sub(receipt).Nanoseconds(), hb.Run
		h.unheardAt = g.unheard
		g.Heartbeats++
	}
	if h.silent {
		g.heardAgain(id, h)
	} else if len(g.openByHost) > 0 {
		// silent when the instance stopped: still, when this is the
		// heartbeat its finding names, else heard again
		if open, ok := g.reopenedHost(host); ok {
			h.open = open
			if open != idOf(string(apm.HostSilent), host, fmt.Sprint(rn)) {
				h.silent = true
				g.heardAgain(id, h)
			}
		}
	}
	g.heard(id, rn, hb.Queued == 0)
	return ""
}
