package fleet

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// decodeHeartbeat checks a heartbeat against its subject.
func decodeHeartbeat(r Received) (wire.Heartbeat, string, refuseReason) {
	var hb wire.Heartbeat
	if len(r.Data) > wire.MaxHeartbeatBytes {
		return hb, "", refusedTooLarge
	}
	host, ok := wire.ParseHeartbeatSubject(r.Subject)
	if !ok {
		return hb, "", refusedBadSubject
	}
	if decodeJSON(r.Data, &hb) != nil || hb.At.IsZero() || len(hb.Run) > wire.MaxRunLen || !utf8.ValidString(hb.Run) {
		return hb, "", refusedUndecodable
	}
	if wire.Token(hb.Host) != host {
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
