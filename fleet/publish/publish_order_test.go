package publish

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// failed is the future of a publish whose acknowledgement never came.
type failed struct {
	m   *nats.Msg
	err chan error
}

func (f failed) Ok() <-chan *jetstream.PubAck { return nil }
func (f failed) Err() <-chan error            { return f.err }
func (f failed) Msg() *nats.Msg               { return f.m }

func TestInFlightHoldsOneRecordOfASubject(t *testing.T) {
	m := func(subj string) Msg { return Msg{Subject: subj} }
	a, b := wire.ConnPrefix+"1.h.d.1", wire.ConnPrefix+"2.h.d.2"
	f := wire.HostFindingSubject("h")
	for _, c := range []struct {
		msgs []Msg
		want int
	}{
		{[]Msg{m(a), m(b), m(f), m(f), m(a), m(b)}, 4},
		{[]Msg{m(a), m(a)}, 1},
		{[]Msg{m(f), m(f), m(f)}, 3},
		{nil, 0},
	} {
		if got := inFlight(c.msgs); got != c.want {
			t.Errorf("inFlight(%v) = %d, want %d", c.msgs, got, c.want)
		}
	}
}

// A record whose publish fails is sent again before the next record of
// its subject leaves: the stream's last record of the subject is the
// publisher's last, never the earlier one stored after it.
func TestPublisherNeverStoresARecordAfterALaterOneOfItsSubject(t *testing.T) {
	url := fleettest.NATS(t)
	p, err := NewPublisher(PublishConfig{NATS: natsconn.NATSOptions{URL: url}, Host: "hostA", QueueDir: filepath.Join(t.TempDir(), "q")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	a := fleettest.Dated(fleettest.Conn("hostA", 1, 17, 2, 18))
	a.Run = "hostA-1"
	live := fleettest.Migrated(a, a.At.Add(time.Second))
	gone := live
	gone.Gone, gone.Rev = true, live.Rev+1
	other := fleettest.Dated(fleettest.Conn("hostA", 1, 19, 2, 20))
	var mu sync.Mutex
	failedOnce := false
	var sent []string // QPN:BehindHeader of each send, in order
	p.pubAsync = func(m *nats.Msg, o ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
		var c wire.Conn
		json.Unmarshal(m.Data, &c)
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, fmt.Sprintf("%d:%s", c.Local.QPN, m.Header.Get(wire.BehindHeader)))
		if c.Local.QPN == 17 && !c.Gone && c.Rev == live.Rev && !failedOnce {
			failedOnce = true
			f := failed{m: m, err: make(chan error, 1)}
			f.err <- errors.New("no acknowledgement")
			return f, nil
		}
		return p.js.PublishMsgAsync(m, o...)
	}
	for _, c := range []wire.Conn{live, other, gone} {
		b, _ := json.Marshal(&c)
		p.put(wire.ConnSubject(&c), b, "conn")
	}
	fleettest.WaitFor(t, 20*time.Second, "the queue to drain", func() bool { return p.q.Stats().Pending == 0 && len(p.in) == 0 })
	var last wire.Conn
	recs := fleettest.StreamMsgs(t, url, wire.ConnStream, wire.ConnSubject(&a))
	if err := json.Unmarshal(recs[len(recs)-1], &last); err != nil {
		t.Fatal(err)
	}
	if !failedOnce || len(recs) != 2 || !last.Gone {
		t.Fatalf("%d records of the subject, the last %+v: want the live one, then the gone", len(recs), last)
	}
	// each record says what was in flight before it: the other end's,
	// sent behind the live record that failed, says 1 (so it moves no
	// watermark); the live one sent again leads its batch: 0
	mu.Lock()
	defer mu.Unlock()
	if len(sent) < 3 || sent[0] != "17:0" || sent[1] != "19:1" || sent[2] != "17:0" {
		t.Fatalf("sends (QPN:%s): %v", wire.BehindHeader, sent)
	}
}
