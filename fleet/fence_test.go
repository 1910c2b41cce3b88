package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// testFence is a fence on its own connection, writing to out.
func testFence(t *testing.T, url string, out io.Writer) (*fence, *fleetMetrics) {
	t.Helper()
	js := fleettest.JetStream(t, url)
	m := newFleetMetrics()
	f := newFence(js, []io.Writer{out}, m, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { f.close(time.Second) })
	return f, m
}

func fenceLine(id uint64, partition int) Line {
	return Line{Line: findingline.New(apm.Finding{ID: id, Kind: apm.OneSidedRearm}, "hostB"), Hosts: []string{"hostA", "hostB"}, Partition: partition}
}

// Two instances that judge the same findings (a share between them):
// each line is written once, by the instance whose publish the stream
// took first, and each instance writes its lines in the order judged.
func TestFenceWritesEachLineOnce(t *testing.T) {
	url := fleettest.NATS(t)
	nc, _ := nats.Connect(url)
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := natsconn.EnsureStreams(context.Background(), js, natsconn.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	var out0, out1 syncBuffer
	f0, m0 := testFence(t, url, &out0)
	f1, m1 := testFence(t, url, &out1)
	const n = 200
	done := make(chan struct{})
	go func() {
		for i := range n {
			f1.emit(context.Background(), fenceLine(uint64(1000+i), i%wire.Partitions))
		}
		close(done)
	}()
	for i := range n {
		f0.emit(context.Background(), fenceLine(uint64(1000+i), i%wire.Partitions))
	}
	<-done
	// the bound only ends a hung test (R3 on a cluster is slower to acknowledge)
	if !f0.flush(context.Background(), time.Minute) || !f1.flush(context.Background(), time.Minute) {
		t.Fatal("lines not settled")
	}
	seen := map[uint64]int{}
	for _, ls := range [][]outLine{out0.lines(t), out1.lines(t)} {
		last := uint64(0)
		for _, l := range ls {
			seen[l.ID]++
			if l.ID <= last {
				t.Fatalf("line %d after %d", l.ID, last)
			}
			last = l.ID
		}
	}
	dups := testutil.ToFloat64(m0.fencedDuplicates) + testutil.ToFloat64(m1.fencedDuplicates)
	if len(seen) != n || dups != n {
		t.Fatalf("%d distinct lines of %d, %v duplicates not written", len(seen), n, dups)
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("line %d written %d times", id, k)
		}
	}
	if got := len(fleettest.StreamMsgs(t, url, wire.FindingsStream, wire.FleetFindingPfx+">")); got != n {
		t.Fatalf("%d lines in the stream, want %d", got, n)
	}
}

// A line no stream acknowledges is not written; once the stream is there
// it is sent again and written, once.
func TestFenceWritesALineOnlyOnceAcknowledged(t *testing.T) {
	url := fleettest.NATSBare(t) // no stream until the test makes it
	var out syncBuffer
	f, m := testFence(t, url, &out)
	f.emit(context.Background(), fenceLine(7, 3))
	fleettest.WaitFor(t, 20*time.Second, "a failed publish", func() bool { return testutil.ToFloat64(m.publishErrors) > 0 })
	if ls := out.lines(t); len(ls) != 0 {
		t.Fatalf("written before any acknowledgement: %+v", ls)
	}
	nc, _ := nats.Connect(url)
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := natsconn.EnsureStreams(context.Background(), js, natsconn.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	fleettest.WaitFor(t, 20*time.Second, "the line, acknowledged", func() bool { return len(out.lines(t)) == 1 })
	time.Sleep(300 * time.Millisecond)
	if ls := out.lines(t); len(ls) != 1 || ls[0].ID != 7 {
		t.Fatalf("lines: %+v", ls)
	}
}

// A line the stream stored although its acknowledgement was lost (its
// leader died after storing it) is answered "duplicate" when sent again:
// stored under this fence's identity it is this fence's own, and written;
// under another's it is not.
func TestFenceWritesItsOwnLineWhoseAcknowledgementWasLost(t *testing.T) {
	url := fleettest.NATS(t)
	js := fleettest.JS(t, url)
	var out syncBuffer
	f, m := testFence(t, url, &out)
	store := func(id uint64, judge string) {
		l := fenceLine(id, 5)
		msg := &nats.Msg{Subject: wire.FleetFindingSubject(l.Partition), Data: []byte(`{}`),
			Header: nats.Header{jetstream.MsgIDHeader: []string{fmt.Sprintf("fleet-%d", id)}, JudgeHeader: []string{judge}}}
		if _, err := js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	store(8, f.id)      // this fence's first try, stored; its acknowledgement never came
	store(9, "another") // another instance's
	f.emit(context.Background(), fenceLine(8, 5))
	f.emit(context.Background(), fenceLine(9, 5))
	if !f.flush(context.Background(), time.Minute) {
		t.Fatal("lines not settled")
	}
	ls := out.lines(t)
	if len(ls) != 1 || ls[0].ID != 8 {
		t.Fatalf("lines written: %+v, want only line 8", ls)
	}
	if d := testutil.ToFloat64(m.fencedDuplicates); d != 1 {
		t.Fatalf("%v duplicates counted, want 1", d)
	}
}
