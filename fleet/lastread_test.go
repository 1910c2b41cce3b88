package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServers returns the servers a test of the streams runs against:
// the embedded one, and a separate nats-server process of the same
// version (natsproc_test.go).
func natsServers(t *testing.T) map[string]string {
	t.Helper()
	srv := startServer(t, "127.0.0.1:0", t.TempDir())
	t.Cleanup(srv.Shutdown)
	return map[string]string{"embedded": srv.URL(), "nats-server": startNATSServer(t)}
}

// startNATSServer starts one nats-server process with JetStream on
// loopback, for the test's life, and returns its URL.
func startNATSServer(t *testing.T) string {
	t.Helper()
	url, _ := startNATSServerPID(t)
	return url
}

// startNATSServerPID is startNATSServer, with the process's ID.
func startNATSServerPID(t *testing.T) (string, int) {
	t.Helper()
	bin := natsServerBinary(t)
	addr := freePort(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", port, "-js", "-sd", filepath.Join(t.TempDir(), "js"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := "nats://" + addr
	waitFor(t, 10*time.Second, "nats-server", func() bool {
		nc, err := nats.Connect(url)
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
	return url, cmd.Process.Pid
}

func jsOf(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	js := testJetStream(t, url)
	if err := ensureStreams(context.Background(), js, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	return js
}

// store publishes records on their subjects and waits for the stream to
// acknowledge every one.
func store(t *testing.T, js jetstream.JetStream, cs ...Conn) {
	t.Helper()
	for i := range cs {
		b, err := json.Marshal(&cs[i])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishAsync(ConnSubject(&cs[i]), b); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("records not acknowledged in 30s")
	}
}

// base is when the records of a test in the streams were published: an
// hour ago (a stream's records are from the past).
var base = time.Now().Add(-time.Hour).UTC().Truncate(time.Second)

// dated moves a record of the engine tests (dated t0) to base.
func dated(c Conn) Conn {
	c.At, c.Changed = base.Add(c.At.Sub(t0)), base.Add(c.Changed.Sub(t0))
	return c
}

// filler is one of n unpaired ends of hostC, in revision rev.
func filler(i, rev int) Conn {
	c := dated(conn("hostC", 40, uint32(1000+i), 41, uint32(5000+i)))
	c.Run, c.Rev, c.At = "hostC-1", uint64(rev), base.Add(time.Duration(rev)*time.Second)
	return c
}

// fillers stores rounds revisions of n ends, an end's one after
// another: past the first thousand ends' last records come earlier
// revisions of the others.
func fillers(t *testing.T, js jetstream.JetStream, n, rounds int) {
	t.Helper()
	var cs []Conn
	for i := range n {
		for r := 1; r <= rounds; r++ {
			cs = append(cs, filler(i, r))
		}
	}
	store(t, js, cs...)
}

// More than a thousand subjects of several records each: the reading
// gives each subject once, its last record, whatever the batches.
func TestReadLastGivesExactlyTheLastRecordOfEachSubject(t *testing.T) {
	for name, url := range natsServers(t) {
		t.Run(name, func(t *testing.T) {
			js := jsOf(t, url)
			const n, rounds = 1200, 3
			fillers(t, js, n, rounds)
			got := map[string]int{}
			k, err := readLastOf(context.Background(), js, []string{connPrefix + ">"}, 10*n, func(r lastRecord) {
				var c Conn
				if err := json.Unmarshal(r.Data, &c); err != nil {
					t.Fatal(err)
				}
				if c.Rev != rounds || r.Stored.IsZero() || r.Seq%rounds != 0 {
					t.Fatalf("not the last record of %s: rev %d, seq %d", r.Subject, c.Rev, r.Seq)
				}
				got[r.Subject]++
			})
			if err != nil || k != n || len(got) != n {
				t.Fatalf("%d records of %d subjects (%v), want %d", k, len(got), err, n)
			}
			// past its bound the reading fails rather than give a part
			if _, err := readLastOf(context.Background(), js, []string{connPrefix + ">"}, n-1, func(lastRecord) {}); err == nil {
				t.Fatal("a reading past its bound did not fail")
			}
		})
	}
}

// fleet status is the last record of every end: an end whose host
// restarted with its clock an hour behind is shown as its last record
// says, however many records the stream holds before it.
func TestStatusReadsTheLastRecordOfEachEndPastAThousand(t *testing.T) {
	for name, url := range natsServers(t) {
		t.Run(name, func(t *testing.T) {
			js := jsOf(t, url)
			fillers(t, js, 1200, 3)
			m := base.Add(time.Minute)
			a, b := dated(conn("hostA", 1, 17, 2, 18)), dated(conn("hostB", 2, 18, 1, 17))
			a.Run, b.Run = "hostA-1", "hostB-1"
			a = rearmed(migrated(a, m), m.Add(time.Millisecond))
			// hostB restarted; its clock came back an hour behind: its
			// new run's record (migrated, not rearmed) is its last
			b2 := migrated(b, m.Add(-time.Hour))
			b2.Run, b2.Rev = "hostB-2", 1
			store(t, js, a, b, b2)
			st, err := ReadStatus(context.Background(), NATSOptions{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			if st.Ends != 1202 || len(st.Rows) != 1 || st.Rows[0].State != "one-sided" || st.Rows[0].ArmedB {
				t.Fatalf("status: %d ends, rows %+v, want 1202 ends and the pair one-sided", st.Ends, st.Rows)
			}
		})
	}
}

// A restarted publisher seeds its tracker with one record per end of
// its host: the last.
func TestPublisherSeedsWithTheLastRecordOfEachOfItsEnds(t *testing.T) {
	url := testNATS(t)
	js := jsOf(t, url)
	const n, rounds = 1100, 3
	fillers(t, js, n, rounds)
	store(t, js, dated(conn("hostA", 1, 17, 2, 18))) // another host's
	p, err := NewPublisher(PublishConfig{NATS: NATSOptions{URL: url}, Host: "hostC", QueueDir: filepath.Join(t.TempDir(), "q")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	var cs []Conn
	select {
	case cs = <-p.seeds:
	case <-time.After(30 * time.Second):
		t.Fatal("no seeds in 30s")
	}
	ends := map[string]bool{}
	for _, c := range cs {
		if c.Host != "hostC" || c.Rev != rounds {
			t.Fatalf("seed %+v: not hostC's last record", c)
		}
		ends[fmt.Sprint(c.Device, c.Local.QPN)] = true
	}
	if len(cs) != n || len(ends) != n {
		t.Fatalf("%d seeds of %d ends, want %d", len(cs), len(ends), n)
	}
}

// A host reads its earlier records back with the permissions fleet
// add-host gives it: a consumer of one filter, its own subjects.
func TestPublisherSeedsThroughItsHostsPermissions(t *testing.T) {
	dir := t.TempDir()
	cfg := embeddedConfig(t)
	cfg.Auth = addUsers(t, dir)
	f, _ := runFleet(t, cfg)
	url := f.readyInfo(t).NATS
	a, _, _ := pairOver(t, hostOpts(url, dir, "node17"), hostOpts(url, dir, "node18"), "node17", "node18")
	s := &side{p: a, dev: "ibsim0", qpn: 100}
	s.connect(2, 200)
	a.Tick(time.Now())
	fleetUser := NATSOptions{URL: url, NKeyFile: filepath.Join(dir, "fleet.nk")}
	waitFor(t, 30*time.Second, "the record", func() bool {
		st, err := ReadStatus(context.Background(), fleetUser)
		return err == nil && st.Ends == 1
	})
	a.Close(time.Second)
	again, err := NewPublisher(PublishConfig{NATS: hostOpts(url, dir, "node17"), Host: "node17", QueueDir: filepath.Join(t.TempDir(), "q")})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(time.Second)
	select {
	case cs := <-again.seeds:
		if len(cs) != 1 || cs[0].Local.QPN != 100 {
			t.Fatalf("seeds: %+v", cs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no seeds in 30s")
	}
}
