package publish

import (
	"context"
	"encoding/json"
	"time"

	"github.com/apmwatch/apmwatch/fleet/wire"
)

// heartbeat sends the host's heartbeat at once and then every
// HeartbeatEvery, straight to JetStream, while NATS is connected: its
// run, its own time and how many messages it still holds (handed to the
// queue or in it, not yet acknowledged). Those are read before the
// heartbeat is sent, so a heartbeat that says 0 comes after everything
// the host queued before it. A heartbeat that cannot be sent is not kept:
// the next one says more.
func (p *Publisher) heartbeat(ctx context.Context) {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.HeartbeatEvery)
	defer t.Stop()
	said := false
	for {
		if p.nc.IsConnected() {
			err := p.sendHeartbeat(ctx)
			switch {
			case err != nil && !said && ctx.Err() == nil:
				p.log.Warn("nats: heartbeat not stored", "subject", wire.HeartbeatSubject(p.cfg.Host), "err", err)
				said = true
			case err == nil && said:
				p.log.Info("nats: heartbeat stored again")
				said = false
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// queued is how many messages the publisher holds: records the loop
// keeps for want of room in the intake (read first: they move on from
// there), handed to the intake or in the queue, not yet acknowledged.
func (p *Publisher) queued() uint64 {
	n := p.deferred.Load()
	n += p.handing.Load()
	n += int64(p.q.Stats().Pending)
	return uint64(max(0, n))
}

func (p *Publisher) sendHeartbeat(ctx context.Context) error {
	hb := wire.Heartbeat{Host: p.cfg.Host, Run: p.tracker.Run, At: time.Now().UTC(), Queued: p.queued(),
		Every: p.cfg.HeartbeatEvery.Seconds()}
	b, err := json.Marshal(hb)
	if err != nil {
		return err
	}
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = p.js.Publish(c, wire.HeartbeatSubject(p.cfg.Host), b)
	return err
}
