package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/findingline/findinglinetest"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/publish"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// twoHosts starts a publisher per host over a fake sysfs: hostA's ibsim0
// port has LID 1, hostB's ibsim1 LID 2, both in subnet fe80::.
func twoHosts(t *testing.T, url string) (a, b *publish.Publisher) {
	sys := t.TempDir()
	fleettest.FakeSysfs(t, sys, "ibsim0", 1, "fe80::1")
	fleettest.FakeSysfs(t, sys, "ibsim1", 2, "fe80::2")
	return newPublisher(t, url, "hostA", sys), newPublisher(t, url, "hostB", sys)
}

// oneSided connects n pairs (QPNs 100+i on hostA, 200+i on hostB), arms
// them, migrates them and rearms only hostA's ends.
func oneSided(a, b *publish.Publisher, n int) []*side {
	return oneSidedFrom(a, b, 100, 200, n)
}

// oneSidedFrom is oneSided with hostA's QPNs from qa, hostB's from qb.
func oneSidedFrom(a, b *publish.Publisher, qa, qb uint32, n int) []*side {
	var sides []*side
	for i := range uint32(n) {
		sa := &side{p: a, dev: "ibsim0", qpn: qa + i}
		sb := &side{p: b, dev: "ibsim1", qpn: qb + i}
		sa.connect(2, sb.qpn)
		sb.connect(1, sa.qpn)
		sides = append(sides, sa, sb)
	}
	a.Tick(time.Now())
	b.Tick(time.Now())
	for _, s := range sides {
		s.pathMig()
	}
	for i := 0; i < len(sides); i += 2 {
		sides[i].arm()
	}
	a.Tick(time.Now())
	b.Tick(time.Now())
	return sides
}

func TestFleetReportsOneSidedRearmNamingBothHosts(t *testing.T) {
	url := fleettest.NATS(t)
	f := startFleet(t, url, 0, 1)
	defer f.stop()
	a, b := twoHosts(t, url)
	a.Line(findingline.New(apm.Finding{ID: 1, Kind: apm.MissedRearm}, "hostA"))
	oneSided(a, b, 1)
	fleettest.WaitFor(t, 20*time.Second, "a finding", func() bool { return len(f.out.lines(t)) > 0 })
	ls := f.out.lines(t)
	l := ls[0]
	if len(ls) != 1 || l.Kind != apm.OneSidedRearm || l.Host != "hostB" || l.QP.QPN != 200 || l.Peer.Host != "hostA" || l.Peer.QPN != 100 ||
		!slices.Equal(l.Hosts, []string{"hostA", "hostB"}) || l.Type != "finding" {
		t.Fatalf("lines: %+v", ls)
	}
	fleettest.WaitFor(t, 10*time.Second, "the finding in the stream", func() bool {
		return len(fleettest.StreamMsgs(t, url, wire.FindingsStream, wire.FleetFindingSubject(l.Partition))) == 1
	})
	hostLines := fleettest.StreamMsgs(t, url, wire.FindingsStream, wire.HostFindingSubject("hostA"))
	if len(hostLines) != 1 {
		t.Fatalf("hostA's finding lines in the stream: %d", len(hostLines))
	}
	for _, m := range append(hostLines, fleettest.StreamMsgs(t, url, wire.FindingsStream, wire.FleetFindingSubject(l.Partition))...) {
		if err := findinglinetest.Check(m); err != nil {
			t.Errorf("a line in the findings stream: %v\n%s", err, m)
		}
	}
	st, err := ReadStatus(context.Background(), natsconn.NATSOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Rows) != 1 || st.Rows[0].State != "one-sided" || st.Rows[0].A.Host != "hostA" || st.Rows[0].B.Host != "hostB" ||
		!st.Rows[0].ArmedA || st.Rows[0].ArmedB || st.ByState["one-sided"] != 1 {
		t.Fatalf("status: %+v", st)
	}
	var tab strings.Builder
	if err := WriteStatusTable(&tab, st); err != nil || !strings.Contains(tab.String(), "1 connections cannot fail over") {
		t.Fatalf("table: %v\n%s", err, tab.String())
	}
}

func TestFleetRestartRebuildsStateAndJudgesNothingTwice(t *testing.T) {
	url := fleettest.NATS(t)
	f := startFleet(t, url, 0, 1)
	a, b := twoHosts(t, url)
	sides := oneSided(a, b, 3)
	fleettest.WaitFor(t, 20*time.Second, "3 findings", func() bool { return len(f.out.lines(t)) == 3 })
	f.stop()

	g := startFleet(t, url, 0, 1)
	defer g.stop()
	if r := g.readyInfo(t); r.Ends != 6 {
		t.Fatalf("rebuilt %d ends, want 6", r.Ends)
	}
	// hostB's first QP rearms: the rebuilt instance knows the open
	// finding and resolves it; the other two are not judged again
	sides[1].arm()
	b.Tick(time.Now())
	fleettest.WaitFor(t, 20*time.Second, "a resolution", func() bool { return len(g.out.lines(t)) > 0 })
	time.Sleep(time.Second) // twice the deadline: a second judgement would be out by now
	ls := g.out.lines(t)
	var first uint64 // the finding on hostB's QP 200 (the three come in the order their deadlines passed)
	for _, l := range f.out.lines(t) {
		if l.QP.QPN == 200 {
			first = l.ID
		}
	}
	if len(ls) != 1 || !ls[0].Resolved || ls[0].Resolves != first {
		t.Fatalf("after the restart: %+v", ls)
	}
}

func TestFleetInstancesSplitTheWork(t *testing.T) {
	url := fleettest.NATS(t)
	f0 := startFleet(t, url, 0, 2)
	defer f0.stop()
	f1 := startFleet(t, url, 1, 2)
	defer f1.stop()
	a, b := twoHosts(t, url)
	const n = 40
	oneSided(a, b, n)
	fleettest.WaitFor(t, 30*time.Second, fmt.Sprint(n, " findings"), func() bool { return len(f0.out.lines(t))+len(f1.out.lines(t)) >= n })
	time.Sleep(time.Second)
	l0, l1 := f0.out.lines(t), f1.out.lines(t)
	if len(l0)+len(l1) != n || len(l0) == 0 || len(l1) == 0 {
		t.Fatalf("instance 0 gave %d, instance 1 %d, want %d in all, some each", len(l0), len(l1), n)
	}
	seen := map[uint32]bool{}
	for i, ls := range [][]outLine{l0, l1} {
		for _, l := range ls {
			if l.Partition%2 != i || seen[l.QP.QPN] {
				t.Fatalf("instance %d: %+v", i, l)
			}
			seen[l.QP.QPN] = true
		}
	}
}

func TestPostmortemOfAStreamRangeJudgesThePairs(t *testing.T) {
	url := fleettest.NATS(t)
	since := time.Now().Add(-time.Second)
	a, b := twoHosts(t, url)
	a.Line(findingline.New(apm.Finding{ID: 1, Kind: apm.MissedRearm}, "hostA"))
	oneSided(a, b, 2)
	fleettest.WaitFor(t, 20*time.Second, "the records in the stream", func() bool {
		m, err := fleettest.TryStreamMsgs(url, wire.ConnStream, wire.ConnPrefix+">")
		return err == nil && len(m) == 8
	})
	h, err := ReadHistory(context.Background(), HistoryOptions{NATS: natsconn.NATSOptions{URL: url}, Since: since, Until: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if h.Records != 8 || len(h.Lines) != 1 || len(h.Judged) != 2 || len(h.Connections) != 2 {
		t.Fatalf("history: %d records, %d lines, %d judged, %d connections", h.Records, len(h.Lines), len(h.Judged), len(h.Connections))
	}
	for _, c := range h.Connections {
		if c.State != "one-sided" || len(c.Records) != 4 {
			t.Fatalf("connection: %+v", c)
		}
	}
	for _, l := range h.Judged {
		if l.Kind != apm.OneSidedRearm || l.Host != "hostB" {
			t.Fatalf("judged: %+v", l)
		}
	}
	var text strings.Builder
	if err := WriteHistoryText(&text, h); err != nil || !strings.Contains(text.String(), "one-sided-rearm hostB ibsim1 QP 200") {
		t.Fatalf("text: %v\n%s", err, text.String())
	}
	// a range before anything was published is empty
	h, err = ReadHistory(context.Background(), HistoryOptions{NATS: natsconn.NATSOptions{URL: url}, Since: since.Add(-time.Hour), Until: since})
	if err != nil || h.Records != 0 || len(h.Lines) != 0 {
		t.Fatalf("empty range: %+v, %v", h, err)
	}
}

func TestFleetConsumesRecordsSplitOverOperatorStreams(t *testing.T) {
	url := fleettest.NATSBare(t) // the operator's streams, not the fleet's
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for i := range 2 {
		var subs []string
		for p := i * wire.Partitions / 2; p < (i+1)*wire.Partitions/2; p++ {
			subs = append(subs, wire.ConnFilter(p))
		}
		if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: fmt.Sprintf("CONN_%d", i), Subjects: subs,
			MaxMsgsPerSubject: 4}); err != nil {
			t.Fatal(err)
		}
	}
	f := startFleet(t, url, 0, 1)
	defer f.stop()
	a, b := twoHosts(t, url)
	const n = 10
	oneSided(a, b, n)
	fleettest.WaitFor(t, 20*time.Second, "the findings", func() bool { return len(f.out.lines(t)) >= n })
	if _, err := js.Stream(context.Background(), wire.ConnStream); err == nil {
		t.Fatal("the default stream was created over the operator's")
	}
	st, err := ReadStatus(context.Background(), natsconn.NATSOptions{URL: url})
	if err != nil || len(st.Rows) != n {
		t.Fatalf("status over two streams: %+v, %v", st, err)
	}
}

// A restarted audit sees its old QPs only in rdma netlink readings (no
// path): it takes their addresses from its own last records in the stream
// and publishes on the same subjects, so the fleet keeps following them.
func TestRestartedPublisherKeepsItsEndsSubjects(t *testing.T) {
	url := fleettest.NATS(t)
	a, b := twoHosts(t, url)
	oneSided(a, b, 1)
	fleettest.WaitFor(t, 20*time.Second, "the records", func() bool {
		m, err := fleettest.TryStreamMsgs(url, wire.ConnStream, wire.ConnPrefix+">")
		return err == nil && len(m) == 4
	})
	b.Close(time.Second)
	sys := t.TempDir()
	fleettest.FakeSysfs(t, sys, "ibsim1", 2, "fe80::2")
	b2 := newPublisher(t, url, "hostB", sys)
	s := &side{p: b2, dev: "ibsim1", qpn: 200}
	s.ev(&event.Event{Kind: event.KindTruth, Truth: &event.Truth{Op: event.TruthRead, QPType: event.QPTypeRC, RQPN: 100,
		Mig: event.MigRearm, HasState: true, State: event.StateRTS}})
	fleettest.WaitFor(t, 20*time.Second, "the restarted host's record", func() bool {
		b2.Tick(time.Now())
		m, err := fleettest.TryStreamMsgs(url, wire.ConnStream, wire.ConnPrefix+">")
		return err == nil && len(m) == 5
	})
	all := fleettest.StreamMsgs(t, url, wire.ConnStream, wire.ConnPrefix+">")
	var c wire.Conn
	if err := jsonUnmarshal(all[4], &c); err != nil {
		t.Fatal(err)
	}
	if c.Host != "hostB" || c.Remote != (wire.Addr{LID: 1, QPN: 100}) || !c.Armed {
		t.Fatalf("record after the restart: %+v", c)
	}
	var first wire.Conn
	for _, m := range all {
		if jsonUnmarshal(m, &first); first.Host == "hostB" {
			break
		}
	}
	if wire.ConnSubject(&c) != wire.ConnSubject(&first) {
		t.Fatalf("subject changed: %s, was %s", wire.ConnSubject(&c), wire.ConnSubject(&first))
	}
}

// A record that does not decode (hostile or broken publisher) is skipped
// and counted; the rebuild still completes.
func TestFleetSkipsARecordThatDoesNotDecode(t *testing.T) {
	url := fleettest.NATS(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := natsconn.EnsureStreams(context.Background(), js, natsconn.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), wire.ConnPrefix+"3.evil.dev.1", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, url, 0, 1) // waits for the ready file
	defer f.stop()
	if r := f.readyInfo(t); r.Ends != 0 {
		t.Fatalf("ready: %+v", r)
	}
}

// A running fleet binds each record to its subject: a record of hostB's end
// on a subject of hostA (a forgery) is refused, never applied; hostA's own
// record on its own subject is taken.
func TestFleetRefusesARecordOnAnotherHostsSubject(t *testing.T) {
	url := fleettest.NATS(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := natsconn.EnsureStreams(context.Background(), js, natsconn.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	forged := fleettest.Conn("hostB", 2, 18, 1, 17)
	forged.At, forged.Changed = now, now
	honest := fleettest.Conn("hostA", 1, 17, 2, 18)
	honest.At, honest.Changed = now, now
	other := fleettest.Conn("hostA", 1, 99, 2, 98) // another end of hostA: its subject carries the forgery
	if _, err := js.Publish(context.Background(), wire.ConnSubject(&honest), mustJSON(t, honest)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), wire.ConnSubject(&other), mustJSON(t, forged)); err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, url, 0, 1) // waits for the ready file
	defer f.stop()
	if r := f.readyInfo(t); r.Ends != 1 {
		t.Fatalf("ready: %+v: want the one record on its own subject", r)
	}
}
