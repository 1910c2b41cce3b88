package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/apmwatch/apmwatch/rdmanl"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// PublishConfig is what `apmwatch audit --publish` takes.
type PublishConfig struct {
	NATS      natsconn.NATSOptions
	Host      string // the host name in records and subjects
	QueueDir  string // the on-disk queue
	QueueMax  int64  // its bound, bytes
	SysfsRoot string // /sys/class/infiniband ("" for that)
	Limits    natsconn.StreamLimits
	Refresh   time.Duration // republish unchanged ends this often (DefaultRefresh)
	Device    string        // the one device audited ("": all), whose QPs the readings list
	Log       *slog.Logger
	// HeartbeatEvery is the period of the host's heartbeat
	// (DefaultHeartbeatEvery; negative: none).
	HeartbeatEvery time.Duration
}

// DefaultRefresh is how often an unchanged end is published again: well
// within the connection stream's age limit.
const DefaultRefresh = 6 * time.Hour

// DefaultQueueMax bounds the publish queue by default.
const DefaultQueueMax = 64 << 20

// Publisher is the audit daemon's Sink: it turns events into connection
// records (Tracker) and, with every finding line, puts them in the
// on-disk queue, which a goroutine sends to JetStream. The audit loop
// never waits for NATS, nor for the disk: it hands messages over a
// bounded channel (a message that does not fit is dropped and counted).
type Publisher struct {
	cfg     PublishConfig
	tracker *Tracker
	q       *Queue
	in      chan Msg
	wake    chan struct{}
	seeds   chan []wire.Conn // this host's last records, from the stream, for the loop
	run     string           // this run's ID, in message IDs
	seq     uint64
	nc      *nats.Conn
	js      jetstream.JetStream
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	log     *slog.Logger
	m       pubMetrics
	closeMu sync.Once
	said    bool // the send goroutine's: NATS unreachable was logged
	// pubAsync hands one message to JetStream (js.PublishMsgAsync; a
	// test's stand-in fails some).
	pubAsync func(*nats.Msg, ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
	// readings hands the loop the first rdma netlink reading after the
	// seeds were taken (wantReading): the QPs it lists, to their remote QPN
	readings    chan map[event.QPKey]uint32
	wantReading atomic.Bool
	// handing counts the messages handed to the intake and not yet in
	// the queue (a heartbeat counts them as queued)
	handing atomic.Int64
	// backlog holds the loop's records that found the intake full, in
	// order: they go first at the next tick, and until they are gone no
	// changed end is flushed (it stays changed, its later changes
	// folded into one record)
	backlog []wire.Conn
	// deferred counts the backlog and the changed ends a tick left for
	// want of room (a heartbeat counts them as queued)
	deferred atomic.Int64
}

// intakeSize bounds the messages between the audit loop and the queue.
const intakeSize = 8192

// intakeForLines is the part of the intake connection records leave to
// finding lines.
const intakeForLines = 1024

// NewPublisher opens the queue, dials NATS (without waiting for it) and
// starts sending.
func NewPublisher(cfg PublishConfig) (*Publisher, error) {
	if err := cfg.NATS.Validate(); err != nil {
		return nil, err
	}
	if cfg.QueueMax == 0 {
		cfg.QueueMax = DefaultQueueMax
	}
	if cfg.Limits == (natsconn.StreamLimits{}) {
		cfg.Limits = natsconn.DefaultLimits
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	q, err := OpenQueue(cfg.QueueDir, cfg.Host, cfg.QueueMax)
	if err != nil {
		return nil, err
	}
	cfg.NATS.Name = "apmwatch audit " + cfg.Host
	nc, err := cfg.NATS.Connect(true)
	if err != nil {
		q.Close()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		q.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.HeartbeatEvery == 0 {
		cfg.HeartbeatEvery = wire.DefaultHeartbeatEvery
	}
	tr := NewTracker(cfg.Host, cfg.SysfsRoot)
	tr.Refresh = cfg.Refresh
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	tr.Run = cfg.Host + "-" + run
	p := &Publisher{cfg: cfg, tracker: tr, q: q, in: make(chan Msg, intakeSize),
		wake: make(chan struct{}, 1), seeds: make(chan []wire.Conn, 1), readings: make(chan map[event.QPKey]uint32, 1), run: run, nc: nc, js: js, log: cfg.Log,
		m: newPubMetrics(q, nc)}
	p.pubAsync = js.PublishMsgAsync
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(2)
	go p.intake()
	go p.send(ctx)
	if cfg.HeartbeatEvery > 0 {
		p.wg.Add(1)
		go p.heartbeat(ctx)
	}
	return p, nil
}

// Line queues a finding line (audit.Sink).
func (p *Publisher) Line(l findingline.Line) {
	b, err := json.Marshal(escape.Value(l))
	if err != nil {
		return
	}
	p.put(wire.HostFindingSubject(l.Host), b, "finding")
}

// Observe takes one event (audit.Sink).
func (p *Publisher) Observe(e *event.Event) { p.tracker.Observe(e) }

// Tick queues the records of the ends that changed (audit.Sink). The
// ends of this host's earlier runs that the first reading after their
// seeds does not list are gone: their gone records go first.
func (p *Publisher) Tick(now time.Time) {
	select {
	case cs := <-p.seeds:
		p.tracker.Seed(cs)
		p.wantReading.Store(true)
	default:
	}
	left := 0
	if p.drain() {
		select {
		case live := <-p.readings:
			gone := p.tracker.Unlisted(live, p.cfg.Device, now)
			if len(gone) > 0 {
				p.log.Info("this host's earlier ends not listed by rdma netlink: marked gone", "ends", len(gone))
			}
			p.backlog = append(p.backlog, gone...)
		default:
		}
		var cs []wire.Conn
		cs, left = p.tracker.FlushAtMost(now, max(0, p.room()-len(p.backlog)))
		p.backlog = append(p.backlog, cs...)
		p.drain()
	} else {
		left = p.tracker.Changed()
	}
	p.deferred.Store(int64(len(p.backlog) + left))
}

// Reading takes an rdma netlink reading (audit.ReadingSink), on the
// goroutine that reads it: the first one after this host's earlier
// records were read says which of their ends are live.
func (p *Publisher) Reading(s rdmanl.Snapshot) {
	if !p.wantReading.Load() {
		return
	}
	live := make(map[event.QPKey]uint32, len(s.QPs))
	for _, q := range s.QPs {
		live[event.QPKey{Device: q.Device, QPN: q.LQPN}] = q.RQPN
	}
	select {
	case p.readings <- live:
		p.wantReading.Store(false)
	default:
	}
}

// intake writes what the loop hands over to the queue on disk.
func (p *Publisher) intake() {
	defer p.wg.Done()
	for m := range p.in {
		err := p.q.Append(m)
		p.handing.Add(-1)
		if errors.Is(err, errNotOwnSubject) {
			p.log.Warn("publish queue: not queued", "err", err) // counted as corrupt
			continue
		} else if err != nil {
			p.m.dropped.WithLabelValues("disk-error").Inc()
			p.log.Warn("publish queue: cannot write", "err", err)
			continue
		}
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// sendBatch is how many messages are in flight to JetStream at once.
const sendBatch = 256

// send sends the queue's head to JetStream, in order, and moves the head
// past what JetStream acknowledged. While NATS is away it retries every
// second; the queue holds the rest.
func (p *Publisher) send(ctx context.Context) {
	defer p.wg.Done()
	down := false
	for !p.ensured(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	seeded := false
	for {
		msgs, pos := p.q.Peek(sendBatch)
		if !seeded {
			// what earlier runs queued goes first; the seeds are read
			// once the stream holds it all
			i := p.earlierRuns(msgs)
			if i == 0 {
				p.loadSeeds(ctx)
				seeded = true
				continue
			}
			msgs, pos = msgs[:i], pos[:i]
		}
		n := inFlight(msgs)
		msgs, pos = msgs[:n], pos[:n]
		if len(msgs) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			case <-time.After(time.Second):
			}
			continue
		}
		n, err := p.publish(ctx, msgs)
		if n > 0 {
			if aerr := p.q.Ack(pos[n-1]); aerr != nil {
				p.log.Warn("publish queue", "err", aerr)
			}
			p.m.sent.Add(float64(n))
		}
		if err != nil {
			p.m.errors.Inc()
			if !down {
				p.log.Warn("nats: publishing failed, keeping the records on disk", "err", err)
				down = true
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		if down {
			p.log.Info("nats: publishing again")
			down = false
		}
	}
}

// earlierRuns returns how many of msgs, from the first, earlier runs of
// the publisher queued (their IDs name their run).
func (p *Publisher) earlierRuns(msgs []Msg) int {
	this := p.cfg.Host + "-" + p.run + "-"
	for i, m := range msgs {
		if strings.HasPrefix(m.ID, this) {
			return i
		}
	}
	return len(msgs)
}

// loadSeeds reads the last record of each of this host's ends (an
// earlier run published them) and hands them to the loop (Tick): QPs
// older than this run take their addresses from there.
func (p *Publisher) loadSeeds(ctx context.Context) {
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var filters []string
	for part := range wire.Partitions {
		filters = append(filters, fmt.Sprintf("%s%d.%s.>", wire.ConnPrefix, part, wire.Token(p.cfg.Host)))
	}
	var cs []wire.Conn
	_, err := natsconn.ReadLastSingly(c, p.js, filters, wire.ConnPrefix+"*."+wire.Token(p.cfg.Host)+".>", wire.MaxTracked, func(r natsconn.LastRecord) {
		var x wire.Conn
		// a record is this host's as it wrote it: on the subject it makes
		if len(r.Data) <= wire.MaxRecordBytes && json.Unmarshal(r.Data, &x) == nil && wire.ConnSubject(&x) == r.Subject {
			cs = append(cs, x)
		}
	})
	if err != nil {
		p.log.Warn("nats: cannot read this host's earlier records", "err", err)
		return
	}
	p.log.Info("nats: this host's earlier records read", "records", len(cs))
	p.seeds <- cs
}

// ensured creates the streams unless they exist; while NATS is away it
// says so once.
func (p *Publisher) ensured(ctx context.Context) bool {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := natsconn.EnsureStreams(c, p.js, p.cfg.Limits)
	if err != nil && ctx.Err() == nil && !p.said {
		p.log.Warn("nats: not reachable yet, keeping the records on disk", "err", err)
		p.said = true
	}
	return err == nil
}

// inFlight returns how many of msgs, from the first, are sent together:
// up to the second record of one connection subject. With one record of a
// subject in flight at a time, a record that fails is sent again before
// any later record of its subject is sent at all, so that the stream's
// last record of a subject is always its publisher's last (a gone end is
// never followed by the live record it replaced). Finding lines, which
// nothing reads as "the last of a subject", all go together.
func inFlight(msgs []Msg) int {
	seen := make(map[string]struct{}, len(msgs))
	for i, m := range msgs {
		if !strings.HasPrefix(m.Subject, wire.ConnPrefix) {
			continue
		}
		if _, twice := seen[m.Subject]; twice {
			return i
		}
		seen[m.Subject] = struct{}{}
	}
	return len(msgs)
}

// publish sends msgs and returns how many from the first were stored.
func (p *Publisher) publish(ctx context.Context, msgs []Msg) (int, error) {
	if !p.nc.IsConnected() {
		return 0, nats.ErrConnectionClosed
	}
	futs := make([]jetstream.PubAckFuture, 0, len(msgs))
	for i, m := range msgs {
		h := nats.Header{jetstream.MsgIDHeader: []string{m.ID}}
		if strings.HasPrefix(m.Subject, wire.ConnPrefix) {
			h.Set(wire.BehindHeader, strconv.Itoa(i)) // every earlier batch is acknowledged
		}
		f, err := p.pubAsync(&nats.Msg{Subject: m.Subject, Data: m.Data, Header: h})
		if err != nil {
			break
		}
		futs = append(futs, f)
	}
	timeout := time.After(10 * time.Second)
	for i, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return i, err
		case <-timeout:
			return i, fmt.Errorf("no acknowledgement from jetstream in 10s")
		case <-ctx.Done():
			return i, ctx.Err()
		}
	}
	if len(futs) < len(msgs) {
		return len(futs), fmt.Errorf("jetstream refused a publish")
	}
	return len(futs), nil
}

// Close stops taking messages, tries for up to wait to send what is
// queued, and closes. What is not sent stays on disk for the next run.
func (p *Publisher) Close(wait time.Duration) {
	p.closeMu.Do(func() {
		deadline := time.Now().Add(wait)
		p.drainUntil(deadline)
		close(p.in)
		for time.Now().Before(deadline) {
			if st := p.q.Stats(); st.Pending == 0 && len(p.in) == 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		p.cancel()
		p.wg.Wait()
		p.nc.Close()
		p.q.Close()
	})
}

// Describe and Collect make the publisher's metrics part of the audit's
// registry (prometheus.Collector).
func (p *Publisher) Describe(ch chan<- *prometheus.Desc) { p.m.describe(ch) }

// Collect implements prometheus.Collector.
func (p *Publisher) Collect(ch chan<- prometheus.Metric) { p.m.collect(ch) }
