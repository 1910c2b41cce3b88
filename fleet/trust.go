package fleet

import (
	"sort"
	"time"

	"github.com/apmwatch/apmwatch/fleet/wire"
)

// A record is hostile input: a host may publish only on its own subjects
// (NATS permissions), but what it puts in a record is its own to say. So
// the subject, not the record, names the end's host, device and QPN, and
// the partition; an end key belongs to the first host that claims it;
// times far ahead of the record's receipt are refused; records and the
// ends of one host are bounded.

// refuseReason is why a record was refused (the reason label of
// apmwatch_fleet_records_refused_total).
type refuseReason uint8

const (
	refusedTooLarge    refuseReason = iota // above wire.MaxRecordBytes
	refusedBadSubject                      // not a connection subject as publishers write them
	refusedUndecodable                     // not a record
	refusedMismatch                        // host, device, QPN or partition not the subject's
	refusedFuture                          // at or changed more than MaxSkew after its receipt
	refusedClaimed                         // the end is another host's (a second claim, or a gone from not its owner)
	refusedHostEnds                        // its host holds MaxEndsPerHost ends already
	nRefusals
)

var refusalNames = [nRefusals]string{"too-large", "bad-subject", "undecodable", "subject-mismatch", "future", "claimed", "host-ends"}

func (r refuseReason) String() string { return refusalNames[r] }

// DefaultMaxSkew is how far ahead of its receipt a record's at and changed
// may be (hosts' clocks are NTP-synchronised; a record dated later would
// hold its end's judgement back until then).
const DefaultMaxSkew = 5 * time.Minute

// DefaultMaxEndsPerHost bounds the ends one host holds in an engine
// (the publisher tracks at most wire.MaxTracked QPs).
const DefaultMaxEndsPerHost = wire.MaxTracked

// Received is a connection record as the stream delivers it.
type Received struct {
	Subject string
	Stored  time.Time // when the stream stored it (its receipt); zero: now
	Data    []byte
	// Behind is how many of its publisher's messages were in flight,
	// unacknowledged, when it was sent (header BehindHeader; absent: 0).
	// Only a record sent with none in flight moves its host's watermark
	// (publish.go): one sent after a record that JetStream then failed
	// may be stored before that record is.
	Behind int
}

// Claim is a second host's claim on an end another host holds: refused.
type Claim struct {
	End      string `json:"end"`      // the end's key
	Owner    string `json:"owner"`    // the host that holds it
	Claimant string `json:"claimant"` // the host refused
	Gone     bool   `json:"gone,omitempty"`
}

// maxClaimsKept bounds the claims an engine lists (all are counted).
const maxClaimsKept = 100

// Take checks a record against the subject it was stored on and applies
// it at now; it returns the record and why it was refused ("" when it
// was not; a stale record is not refused, only counted). Host, device and
// QPN must be the subject's (as tokens) and so must the partition the
// record's addresses make.
func (g *Engine) Take(r Received, now time.Time) (wire.Conn, string) {
	var c wire.Conn
	if len(r.Data) > wire.MaxRecordBytes {
		return c, g.refuse(refusedTooLarge)
	}
	cs, ok := wire.ParseConnSubject(r.Subject)
	if !ok {
		return c, g.refuse(refusedBadSubject)
	}
	if decodeJSON(r.Data, &c) != nil {
		return c, g.refuse(refusedUndecodable)
	}
	if wire.Token(c.Host) != cs.Host || wire.Token(c.Device) != cs.Device || c.Local.QPN != cs.Qpn || c.Partition() != cs.Partition {
		return c, g.refuse(refusedMismatch)
	}
	receipt := r.Stored
	if receipt.IsZero() {
		receipt = now
	}
	if why := g.apply(&c, cs.Host, receipt, now, r.Behind <= 0); why != nRefusals {
		return c, g.refuse(why)
	}
	return c, ""
}

func (g *Engine) refuse(r refuseReason) string {
	g.Refused[r]++
	return r.String()
}

// future reports a record dated more than MaxSkew after its receipt.
func (g *Engine) future(c *wire.Conn, receipt time.Time) bool {
	limit := receipt.Add(g.cfg.MaxSkew)
	return c.At.After(limit) || c.Changed.After(limit)
}

// claimed notes a refused claim on e.
func (g *Engine) claimed(e *end, c *wire.Conn, owner uint32) {
	if len(g.claims) < maxClaimsKept {
		g.claims = append(g.claims, Claim{End: e.key.String(), Owner: g.names.name(e.owner), Claimant: g.names.name(owner), Gone: c.Gone})
	}
}

// Claims returns the refused claims the engine kept (the first
// maxClaimsKept), by end.
func (g *Engine) Claims() []Claim {
	out := append([]Claim(nil), g.claims...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].End < out[j].End })
	return out
}

// RefusedBy returns the records refused, by reason (every reason named).
func (g *Engine) RefusedBy() map[string]uint64 {
	out := make(map[string]uint64, nRefusals)
	for r := range nRefusals {
		out[r.String()] = g.Refused[r]
	}
	return out
}
