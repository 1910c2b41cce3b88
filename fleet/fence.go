package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// The fence: a finding line is written out (standard output, --findings)
// only once the findings stream acknowledged it as new. Its Msg-ID
// derives from the finding's ID, so when two instances judge the same
// thing (a share moving between them, both holding it for a moment) the
// stream stores the first and answers the second "duplicate": that one
// is not written. Lines are written in the order they were judged.
//
// A publish whose acknowledgement was lost (the stream's leader died
// after storing it) is sent again and answered "duplicate" too: each
// line carries its fence's identity (JudgeHeader), and a duplicate
// whose stored copy carries this fence's is this fence's own line, and
// written.

// JudgeHeader names the fence that published a finding line.
const JudgeHeader = "Apmwatch-Judge"

// fenceAckWait is how long a publish waits for its acknowledgement
// before it is sent again (under the same Msg-ID: the stream stores it
// once).
const fenceAckWait = 5 * time.Second

// fence publishes finding lines and writes those the stream took.
type fence struct {
	js      jetstream.JetStream
	out     []io.Writer
	m       *fleetMetrics
	log     *slog.Logger
	q       chan fenced
	stop    chan struct{} // closed: give up what is not acknowledged
	done    chan struct{} // closed when the writer returned
	sent    atomic.Uint64 // lines handed to the fence
	settled atomic.Uint64 // lines written, duplicates or given up
	once    sync.Once
	id      string // this fence's identity (JudgeHeader)
}

// fenced is one line on its way.
type fenced struct {
	msg  *nats.Msg
	line []byte
	ack  jetstream.PubAckFuture // nil: the publish failed at once
}

func newFence(js jetstream.JetStream, out []io.Writer, m *fleetMetrics, log *slog.Logger) *fence {
	f := &fence{js: js, out: out, m: m, log: log, q: make(chan fenced, 4096), stop: make(chan struct{}), done: make(chan struct{}),
		id: nuid.Next()}
	go f.write()
	return f
}

// emit publishes a finding line; it is written once acknowledged. A
// fence full of lines not acknowledged (NATS away) holds the caller back
// until ctx is done.
func (f *fence) emit(ctx context.Context, l Line) {
	l.Logged = time.Now().UTC()
	b, err := json.Marshal(escape.Value(l))
	if err != nil {
		return
	}
	f.m.findings.WithLabelValues(string(l.Kind), l.Type).Inc()
	msg := &nats.Msg{Subject: wire.FleetFindingSubject(l.Partition), Data: b,
		Header: nats.Header{jetstream.MsgIDHeader: []string{fmt.Sprintf("fleet-%d", l.ID)}, JudgeHeader: []string{f.id}}}
	ack, err := f.js.PublishMsgAsync(msg)
	if err != nil {
		ack = nil
	}
	f.sent.Add(1)
	select {
	case f.q <- fenced{msg: msg, line: append(b, '\n'), ack: ack}:
	case <-f.stop:
		f.settled.Add(1)
	case <-ctx.Done(): // the share is no longer this instance's
		f.settled.Add(1)
	}
}

// write writes the acknowledged lines, in order, until closed.
func (f *fence) write() {
	defer close(f.done)
	for {
		select {
		case x := <-f.q:
			f.settle(x)
		case <-f.stop:
			for {
				select {
				case x := <-f.q:
					f.settle(x) // acknowledged by now, or given up at once
				default:
					return
				}
			}
		}
	}
}

// settle waits for one line's acknowledgement, publishing it again while
// none comes (until the fence stops), and writes it unless a duplicate.
func (f *fence) settle(x fenced) {
	defer f.settled.Add(1)
	for try := 0; ; try++ {
		ack, err := f.wait(x)
		if err == nil {
			if ack.Duplicate && !f.ours(ack) {
				f.m.fencedDuplicates.Inc()
				return
			}
			for _, w := range f.out {
				w.Write(x.line)
			}
			return
		}
		f.m.publishErrors.Inc()
		if try == 0 {
			f.log.Warn("a finding not acknowledged by jetstream: publishing it again", "subject", x.msg.Subject, "err", err)
		}
		select {
		case <-f.stop:
			f.log.Error("a finding not acknowledged by jetstream at exit: not written", "subject", x.msg.Subject)
			return
		case <-time.After(min(time.Duration(try+1)*200*time.Millisecond, 2*time.Second)):
		}
		x.ack, err = f.js.PublishMsgAsync(x.msg)
		if err != nil {
			x.ack = nil
		}
	}
}

// ours says whether the line a duplicate acknowledgement names was
// published by this fence (an earlier try whose acknowledgement was
// lost). A stored copy that cannot be read is taken as another's: a line
// is never written twice.
func (f *fence) ours(ack *jetstream.PubAck) bool {
	ctx, cancel := context.WithTimeout(context.Background(), fenceAckWait)
	defer cancel()
	s, err := f.js.Stream(ctx, ack.Stream)
	if err != nil {
		f.log.Warn("a duplicate finding's stored copy not read", "stream", ack.Stream, "seq", ack.Sequence, "err", err)
		return false
	}
	m, err := s.GetMsg(ctx, ack.Sequence)
	if err != nil {
		f.log.Warn("a duplicate finding's stored copy not read", "stream", ack.Stream, "seq", ack.Sequence, "err", err)
		return false
	}
	return m.Header.Get(JudgeHeader) == f.id
}

// wait waits for x's acknowledgement.
func (f *fence) wait(x fenced) (*jetstream.PubAck, error) {
	if x.ack == nil {
		return nil, fmt.Errorf("publishing to %s: not sent", x.msg.Subject)
	}
	t := time.NewTimer(fenceAckWait)
	defer t.Stop()
	select {
	case a := <-x.ack.Ok():
		return a, nil
	case err := <-x.ack.Err():
		return nil, err
	case <-t.C:
		return nil, fmt.Errorf("publishing to %s: no acknowledgement in %v", x.msg.Subject, fenceAckWait)
	case <-f.stop:
		select { // one last look
		case a := <-x.ack.Ok():
			return a, nil
		default:
			return nil, fmt.Errorf("publishing to %s: stopped", x.msg.Subject)
		}
	}
}

// flush waits until every line handed to the fence so far is settled,
// or until timeout; it reports whether they are.
func (f *fence) flush(ctx context.Context, timeout time.Duration) bool {
	target := f.sent.Load()
	end := time.Now().Add(timeout)
	for f.settled.Load() < target {
		if time.Now().After(end) || ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// close settles what it can within timeout, then stops the writer.
func (f *fence) close(timeout time.Duration) {
	if !f.flush(context.Background(), timeout) {
		f.log.Warn("findings not acknowledged by jetstream at exit", "pending", f.sent.Load()-f.settled.Load())
	}
	f.once.Do(func() { close(f.stop) })
	<-f.done
}
