package natsconn

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// FetchAnswered is a Fetch of up to n messages that asks again, for up
// to 2 s, while no server answers: on a cluster a consumer just made may
// not be served by its leader yet ("no responders"; seen in postmortem
// --nats and fleet status against a 3-node cluster).
func FetchAnswered(ctx context.Context, c jetstream.Consumer, n int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	end := time.Now().Add(2 * time.Second)
	for {
		batch, err := c.Fetch(n, opts...)
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(end) {
			return batch, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// LastRecord is the last message of one subject, as the stream stored it.
type LastRecord struct {
	Subject string
	Seq     uint64    // its stream sequence
	Stored  time.Time // when the stream stored it: its receipt
	Data    []byte
}

// Bounds of one reading of the last records.
const (
	lastFetch     = 256             // messages asked for at once
	lastFetchSize = 64<<20 + 64<<10 // bytes asked for at once: NATS's largest payload and its headers
	lastFetchWait = 5 * time.Second // for one batch
)

// ReadLast hands fn the last message of each subject of stream that
// matches filters, as the stream holds them when the reading starts:
// exactly one message per subject, in stream order. It reads a pull
// consumer that delivers the last message per subject and acknowledges
// nothing (no redelivery, no reset: an ordered consumer recreated at
// every fetch would start again after the last message it delivered and
// deliver every later revision) for as many messages as it had pending
// when it was made, which is the number of those subjects. What the
// stream stores after that is not delivered. The reading fails past max
// subjects, when a message is missing from the delivery, and at ctx's
// end; the consumer is deleted after it (the server drops it a minute
// after its last use if that fails). A request the server denies ends it
// at once, with a *DeniedError.
func ReadLast(ctx context.Context, js jetstream.JetStream, stream string, filters []string, max int, fn func(LastRecord)) (n int, err error) {
	ctx, done := Guard(ctx, js.Conn())
	defer done()
	defer func() { err = Denied(ctx, err) }()
	cfg := jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, AckPolicy: jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute, MemoryStorage: true, Replicas: 1, FilterSubjects: filters}
	if len(filters) == 1 {
		cfg.FilterSubject, cfg.FilterSubjects = filters[0], nil
	}
	c, err := js.CreateConsumer(ctx, stream, cfg)
	if err != nil {
		return 0, fmt.Errorf("making a consumer of the last records: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		js.DeleteConsumer(dctx, stream, c.CachedInfo().Name)
	}()
	pending := c.CachedInfo().NumPending
	if pending > uint64(max) {
		return 0, fmt.Errorf("%s holds %d subjects, more than the %d read at most", stream, pending, max)
	}
	seen := make(map[string]struct{}, pending)
	var delivered uint64
	for delivered < pending {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("reading the last records: %w", err)
		}
		fctx, cancel := context.WithTimeout(ctx, lastFetchWait)
		batch, err := FetchAnswered(ctx, c, int(min(pending-delivered, lastFetch)), jetstream.FetchMaxBytes(lastFetchSize), jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			return n, fmt.Errorf("reading the last records: %w", err)
		}
		got, end, err := takeLast(batch, &delivered, pending, seen, fn)
		cancel()
		n += int(got)
		if err != nil {
			return n, err
		}
		if end {
			break
		}
	}
	return n, nil
}

// takeLast hands fn one batch's messages, up to the pending count, each
// subject once; end reports the stream's end (nothing more pending).
func takeLast(batch jetstream.MessageBatch, delivered *uint64, pending uint64, seen map[string]struct{}, fn func(LastRecord)) (n uint64, end bool, err error) {
	got := 0
	for m := range batch.Messages() {
		got++
		md, err := m.Metadata()
		if err != nil {
			return n, false, fmt.Errorf("reading the last records: %w", err)
		}
		if md.Sequence.Consumer != *delivered+1 {
			return n, false, fmt.Errorf("reading the last records: message %d delivered after %d: some were lost", md.Sequence.Consumer, *delivered)
		}
		*delivered = md.Sequence.Consumer
		if _, dup := seen[m.Subject()]; !dup {
			seen[m.Subject()] = struct{}{}
			fn(LastRecord{Subject: m.Subject(), Seq: md.Sequence.Stream, Stored: md.Timestamp, Data: m.Data()})
			n++
		}
		if md.NumPending == 0 || *delivered >= pending {
			return n, true, nil
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		return n, false, fmt.Errorf("reading the last records: %w", err)
	}
	if got == 0 {
		return n, false, fmt.Errorf("reading the last records: nothing delivered in %v with %d of %d still pending", lastFetchWait, pending-*delivered, pending)
	}
	return n, false, nil
}

// ReadLastOf reads the last record of every subject matching filters,
// over every stream that holds them (an operator may split the records
// over several streams by partition), the streams in name order, at most
// max subjects in all.
func ReadLastOf(ctx context.Context, js jetstream.JetStream, filters []string, max int, fn func(LastRecord)) (int, error) {
	streams, err := StreamsOf(ctx, js, filters)
	if err != nil {
		return 0, err
	}
	names := make([]string, 0, len(streams))
	for name := range streams {
		names = append(names, name)
	}
	sort.Strings(names)
	n := 0
	for _, name := range names {
		k, err := ReadLast(ctx, js, name, streams[name], max-n, fn)
		n += k
		if err != nil {
			return n, fmt.Errorf("reading %s: %w", name, err)
		}
	}
	return n, nil
}

// ReadLastSingly is ReadLastOf through consumers of one filter each (a
// host's permissions name the filter, which is part of the API subject of
// a consumer of one filter): merged, which must match what filters do,
// when one stream holds them all, else each filter apart.
func ReadLastSingly(ctx context.Context, js jetstream.JetStream, filters []string, merged string, max int, fn func(LastRecord)) (int, error) {
	streams, err := StreamsOf(ctx, js, filters)
	if err != nil {
		return 0, err
	}
	names := make([]string, 0, len(streams))
	for name := range streams {
		names = append(names, name)
	}
	sort.Strings(names)
	n := 0
	for _, name := range names {
		each := streams[name]
		if len(streams) == 1 {
			each = []string{merged}
		}
		for _, f := range each {
			k, err := ReadLast(ctx, js, name, []string{f}, max-n, fn)
			n += k
			if err != nil {
				return n, fmt.Errorf("reading %s: %w", name, err)
			}
		}
	}
	return n, nil
}

// ReadAll delivers every message a consumer has now, then returns.
// A request the server denies ends it at once, with a *DeniedError.
func ReadAll(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig, fn func(jetstream.Msg)) (int, error) {
	ctx, done := Guard(ctx, js.Conn())
	defer done()
	c, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return 0, Denied(ctx, err)
	}
	pending := c.CachedInfo().NumPending
	n := 0
	for uint64(n) < pending {
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return n, err
		}
		got := 0
		for m := range batch.Messages() {
			fn(m)
			n++
			got++
			if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
				pending = uint64(n)
				break // all there was: not waiting out the fetch
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return n, Denied(ctx, err)
		}
		var d *DeniedError
		if errors.As(context.Cause(ctx), &d) {
			return n, d
		}
		if got == 0 {
			break
		}
	}
	return n, nil
}
