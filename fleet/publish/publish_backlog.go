package publish

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/apmwatch/apmwatch/fleet/wire"
)

// The intake's backlog: a tick's connection records that find the intake
// (the channel to the disk queue) full wait here, in order, and go first
// at the next tick; until they are gone no changed end is flushed (it
// stays changed, its later changes folded into one record), so a host
// with more QPs than the intake holds publishes them all, a tick at a
// time (TestHostWithAHundredThousandQPsPublishesThemAll).

// room is how many connection records the intake takes now.
func (p *Publisher) room() int { return cap(p.in) - intakeForLines - len(p.in) }

// drain hands the backlog to the intake while it has room, and says
// whether it is empty.
func (p *Publisher) drain() bool {
	n := 0
	for n < len(p.backlog) && p.room() > 0 && p.putConn(&p.backlog[n]) {
		n++
	}
	p.backlog = p.backlog[n:]
	if len(p.backlog) == 0 {
		p.backlog = nil
	}
	return len(p.backlog) == 0
}

// drainUntil hands the backlog and every changed end to the intake,
// waiting for room, until deadline: what a run that stops still owes.
func (p *Publisher) drainUntil(deadline time.Time) {
	for time.Now().Before(deadline) {
		if room := p.room(); p.drain() && room > 0 {
			if p.backlog, _ = p.tracker.FlushAtMost(time.Now(), room); len(p.backlog) == 0 {
				return // nothing left that can be published
			}
			continue
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// putConn hands a record to the intake and says whether it took it (a
// record that does not encode is dropped: taken).
func (p *Publisher) putConn(c *wire.Conn) bool {
	b, err := json.Marshal(c)
	if err != nil {
		return true
	}
	return p.put(wire.ConnSubject(c), b, "conn")
}

// put hands a message to the intake, or says it is full: a finding line
// is then dropped and counted, a connection record is the caller's to
// keep.
func (p *Publisher) put(subject string, data []byte, what string) bool {
	m := Msg{Subject: subject, ID: p.cfg.Host + "-" + p.run + "-" + strconv.FormatUint(p.seq+1, 10), Data: data}
	p.handing.Add(1)
	select {
	case p.in <- m:
		p.seq++
		p.m.queued.WithLabelValues(what).Inc()
		return true
	default:
		p.handing.Add(-1)
		if what != "conn" {
			p.m.dropped.WithLabelValues("intake-full").Inc()
		}
		return false
	}
}
