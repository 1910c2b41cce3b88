package fleet

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// When an instance reads its records from several streams (an operator
// split them by partition) and the hosts' heartbeats perhaps from another,
// each stream delivers in the order it stored, but nothing orders one
// stream's messages against another's. The engine needs one order: a
// host's watermark (clock.go) says that nothing it sent before is still
// to come, which holds only if its records in every stream stored before
// its heartbeat were consumed before it. streamMerge gives the engine the
// messages of all streams in the order of their stored times: it holds
// each stream's messages and hands over the earliest head only when every
// other stream either holds a later one or is caught up (its last message
// said nothing was pending) and has had mergeMargin to deliver what it
// stored since. mergeMargin covers the delivery of a caught-up consumer
// and the clocks of the servers leading the streams (NTP keeps them
// within milliseconds). A stream that lags (messages pending) holds the
// others until its messages come: the engine never runs ahead of it.
// Bounded: past maxMerged held messages the earliest goes on (counted in
// OutOfOrder).

// mergeMargin is how long a caught-up stream has to deliver a message
// stored before another stream's.
const mergeMargin = time.Second

// maxMerged bounds the messages held.
const maxMerged = 1 << 15

// merged is one message held.
type merged struct {
	m       jetstream.Msg
	md      *jetstream.MsgMetadata
	stored  time.Time
	pending uint64
}

type mergeStream struct {
	q        []merged
	caughtUp bool // its latest message (or its consumer at start) said nothing was pending
}

// streamMerge orders messages of several streams by stored time.
type streamMerge struct {
	streams map[string]*mergeStream
	held    int
	// latest is the latest stored time handed in, seen at latestAt on the
	// instance's clock: the servers' clock, as well as the instance knows it
	latest, latestAt time.Time
	// OutOfOrder counts the messages handed over past maxMerged.
	OutOfOrder uint64
}

// newStreamMerge starts a merge of the streams named, with what each had
// pending when its consumer was made.
func newStreamMerge(pending map[string]uint64) *streamMerge {
	s := &streamMerge{streams: map[string]*mergeStream{}}
	for name, n := range pending {
		s.streams[name] = &mergeStream{caughtUp: n == 0}
	}
	return s
}

// push holds a message of stream, stored at stored with pending left
// after it, received at now.
func (s *streamMerge) push(stream string, it merged, now time.Time) {
	st := s.streams[stream]
	if st == nil {
		st = &mergeStream{}
		s.streams[stream] = st
	}
	st.q = append(st.q, it)
	st.caughtUp = it.pending == 0
	s.held++
	if it.stored.After(s.latest) {
		s.latest, s.latestAt = it.stored, now
	}
}

// pop hands over the next message in stored order, if its turn has come
// at now.
func (s *streamMerge) pop(now time.Time) (merged, bool) {
	var first *mergeStream
	for _, st := range s.streams {
		if len(st.q) > 0 && (first == nil || st.q[0].stored.Before(first.q[0].stored)) {
			first = st
		}
	}
	if first == nil {
		return merged{}, false
	}
	head := first.q[0]
	if s.held <= maxMerged {
		// the servers' clock now, less the margin: what a caught-up
		// stream stored before that, it has delivered
		horizon := s.latest.Add(now.Sub(s.latestAt)).Add(-mergeMargin)
		for _, st := range s.streams {
			if st == first || len(st.q) > 0 {
				continue // a later head, or the earliest itself
			}
			if !st.caughtUp || horizon.Before(head.stored) {
				return merged{}, false
			}
		}
	} else {
		s.OutOfOrder++
	}
	first.q[0] = merged{}
	first.q = first.q[1:]
	if len(first.q) == 0 {
		first.q = nil
	}
	s.held--
	return head, true
}
