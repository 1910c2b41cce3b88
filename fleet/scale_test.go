package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// scaleSizes are the connection counts of the scale test: 2,000 (make
// test), or APMWATCH_FLEET_SCALE's list (make fleet-scale).
func scaleSizes(t *testing.T) []int {
	v := os.Getenv("APMWATCH_FLEET_SCALE")
	if v == "" {
		return []int{2000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1000 {
			t.Fatalf("APMWATCH_FLEET_SCALE=%q: a list of connection counts of 1000 or more", v)
		}
		out = append(out, n)
	}
	return out
}

// scaleDeadline is the fleet's rearm deadline in the scale test.
const scaleDeadline = 2 * time.Second

// The fleet end to end at scale: the records of n connections between
// 1,000 hosts in a nats-server process, `apmwatch fleet` in its own
// process. It starts (a rebuild of 2n ends); a storm migrates and
// rearms up to 250,000 of the connections, one in a thousand only on
// one side, and the fleet is stopped (SIGSTOP) for 3 s in its middle:
// it writes exactly the one-sided rearms, each once. It restarts (no
// line again), then two instances share the work and one is killed:
// the other takes its share over. Each step's time, CPU and RSS are
// logged (docs/performance.md, "Fleet end to end").
func TestFleetEndToEndAtScale(t *testing.T) {
	for _, n := range scaleSizes(t) {
		t.Run(strconv.Itoa(n), func(t *testing.T) { scaleRun(t, n) })
	}
}

// scaleHosts publishes records and heartbeats as 1,000 hosts would.
type scaleHosts struct {
	t     *testing.T
	js    jetstream.JetStream
	rev   []uint64     // per host
	n     int          // records published
	beats atomic.Int64 // heartbeats published
}

// beatEvery is the hosts' heartbeat period in the scale test: they
// heartbeat all along, as hosts do (every 10 s by default), the fleet
// stopped or starting.
const beatEvery = time.Second

// beatAlong publishes every host's heartbeat every beatEvery until the
// test ends.
func (h *scaleHosts) beatAlong() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(beatEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				h.beat()
			}
		}
	}()
	h.t.Cleanup(func() { close(stop); <-done })
}

func (h *scaleHosts) put(c *wire.Conn) {
	hi := hostIndex(c.Host)
	h.rev[hi]++
	c.Run, c.Rev = c.Host+"-run1", h.rev[hi]
	b, err := json.Marshal(c)
	if err != nil {
		h.t.Fatal(err)
	}
	h.publish(wire.ConnSubject(c), b)
	h.n++
}

// publish hands one message to JetStream, waiting while too many are in
// flight.
func (h *scaleHosts) publish(subject string, b []byte) {
	for {
		_, err := h.js.PublishAsync(subject, b)
		if err == nil {
			return
		}
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			h.t.Errorf("publishing: %v", err) // on the beating goroutine too
			return
		}
	}
}

// beat publishes every host's heartbeat, after what each published
// before on the same connection (nothing of theirs in flight is lost:
// the test stops at a failed publish).
func (h *scaleHosts) beat() {
	now := time.Now().UTC()
	h.beats.Add(int64(len(hostNames)))
	for _, name := range hostNames {
		b, _ := json.Marshal(wire.Heartbeat{Host: name, Run: name + "-run1", At: now, Every: 1})
		h.publish(wire.HeartbeatSubject(name), b)
	}
}

// settle waits for every publish to be acknowledged.
func (h *scaleHosts) settle() {
	select {
	case <-h.js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		h.t.Fatal("publishes not acknowledged in 5 minutes")
	}
}

func hostIndex(name string) int {
	i, _ := strconv.Atoi(strings.TrimPrefix(name, "node"))
	return i
}

// stormOneSided says whether the storm rearms connection i on one side only.
func stormOneSided(i int) bool { return i%1000 == 500 }

func scaleRun(t *testing.T, n int) {
	url, server := fleettest.StartNATSServerPID(t)
	js := fleettest.JS(t, url)
	h := &scaleHosts{t: t, js: js, rev: make([]uint64, len(hostNames))}
	at := time.Now().UTC()
	t0 := time.Now()
	var c wire.Conn
	for i := range n {
		for side := range 2 {
			synth(&c, i, side, at)
			h.put(&c)
		}
	}
	h.beat()
	h.settle()
	h.beatAlong()
	t.Logf("n=%d: %d records stored in %v", n, h.n, time.Since(t0).Round(time.Millisecond))
	scaleSeeds(t, js, n)

	findings := t.TempDir() + "/findings"
	deadline := "--rearm-deadline=" + scaleDeadline.String()
	f := startFleetProc(t, url, findings, deadline, "--pprof")
	start := f.waitReady(30 * time.Minute)
	startCPU := f.cpu()
	_, startPeak := f.rss()
	fleettest.WaitFor(t, time.Minute, "every end held", func() bool { return f.metric("apmwatch_fleet_ends") == float64(2*n) })
	t.Logf("n=%d: start %v, CPU %v, peak RSS %.1f MiB", n, start.Round(time.Millisecond), startCPU, startPeak)

	// the storm, with the 3 s stop in its middle
	storm := min(n, 250_000)
	consumed := f.metric("apmwatch_fleet_records_total")
	cpu0, server0 := f.cpu(), procCPU(t, server)
	h.n = 0
	beats0 := h.beats.Load()
	paused := make(chan struct{})
	profiled := f.profile(os.Getenv("APMWATCH_FLEET_SCALE_PROFILE"), n)
	wall := time.Now()
	h.storm(storm, at, 1, func() {
		go func() {
			f.signal(syscall.SIGSTOP)
			time.Sleep(3 * time.Second)
			f.signal(syscall.SIGCONT)
			close(paused)
		}()
	})
	<-paused
	<-profiled
	want := consumed + float64(h.n)
	fleettest.WaitFor(t, 30*time.Minute, "the storm consumed", func() bool { return f.metric("apmwatch_fleet_records_total") >= want })
	beats := int(h.beats.Load() - beats0)
	stormWall, stormCPU := time.Since(wall), f.cpu()-cpu0
	_, stormPeak := f.rss()
	rate := float64(h.n+beats) / stormCPU.Seconds()
	t.Logf("n=%d: storm of %d records and %d heartbeats (%d connections) consumed in %v (3 s stopped), CPU %v: %.0f messages per CPU-second; peak RSS %.1f MiB; nats-server CPU %v",
		n, h.n, beats, storm, stormWall.Round(time.Millisecond), stormCPU, rate, stormPeak, procCPU(t, server)-server0)
	checkScaleFindings(t, findings, storm)

	// a restart: the rebuild, and no line again
	f.stop()
	f = startFleetProc(t, url, findings, deadline)
	restart := f.waitReady(30 * time.Minute)
	_, restartPeak := f.rss()
	t.Logf("n=%d: restart %v, CPU %v, peak RSS %.1f MiB", n, restart.Round(time.Millisecond), f.cpu(), restartPeak)
	checkScaleFindings(t, findings, storm)
	f.stop()

	// two instances; one killed: the other takes its share over
	f0 := startFleetProc(t, url, findings+".0", deadline, "--instance=0", "--instances=2", "--lease-ttl=2s")
	f1 := startFleetProc(t, url, findings+".1", deadline, "--instance=1", "--instances=2", "--lease-ttl=2s")
	f0.waitReady(30 * time.Minute)
	f1.waitReady(30 * time.Minute)
	_, halfPeak := f0.rss()
	f1.signal(syscall.SIGKILL)
	killed := time.Now()
	fleettest.WaitFor(t, 30*time.Minute, "share 1 taken over", func() bool {
		return f0.logged(`msg="fleet consuming"`, "share=1")
	})
	takeover := time.Since(killed)
	fleettest.WaitFor(t, time.Minute, "every end held", func() bool { return f0.metric("apmwatch_fleet_ends") == float64(2*n) })
	_, overPeak := f0.rss()
	t.Logf("n=%d: takeover %v (lease TTL 2 s); peak RSS of the instance %.1f MiB with half, %.1f MiB with all",
		n, takeover.Round(time.Millisecond), halfPeak, overPeak)
	f0.stop()
	if k, _ := strconv.Atoi(os.Getenv("APMWATCH_FLEET_SCALE_INSTANCES")); k > 1 {
		scaleInstancesStorm(t, h, url, server, n, k, at)
	}
	t.Logf("n=%d | start %.1f s | %.0f messages/CPU-s | peak RSS %.0f MiB | restart %.1f s | takeover %.1f s",
		n, start.Seconds(), rate, max(startPeak, stormPeak, restartPeak), restart.Seconds(), takeover.Seconds())
}

// storm migrates both ends of the first n connections (their episode
// ep) and rearms them, connection after connection, one in a thousand on
// one side only; mid runs halfway; it returns once all is stored.
func (h *scaleHosts) storm(n int, at time.Time, ep uint32, mid func()) {
	for i := range n {
		if i == n/2 && mid != nil {
			mid()
		}
		var a, b wire.Conn
		synth(&a, i, 0, at)
		synth(&b, i, 1, at)
		now := time.Now().UTC()
		for _, e := range []*wire.Conn{&a, &b} {
			e.Armed, e.Changed, e.At = false, now, now
			e.Episode = wire.Episode{N: ep, Migrations: []time.Time{now}}
			h.put(e)
		}
		for _, e := range []*wire.Conn{&a, &b} {
			if e == &b && stormOneSided(i) {
				continue
			}
			e.Armed, e.Episode.Rearm = true, now
			h.put(e)
		}
	}
	h.settle()
}

// checkScaleFindings waits twice the deadline with the hosts heard and
// compares the findings file with the storm's one-sided rearms: each
// once, none else.
func checkScaleFindings(t *testing.T, path string, storm int) {
	t.Helper()
	time.Sleep(2*scaleDeadline + 2*beatEvery)
	want := map[string]bool{}
	for i := range storm {
		if stormOneSided(i) {
			var b wire.Conn
			synth(&b, i, 1, time.Time{})
			want[fmt.Sprintf("%s/%d", b.Host, b.Local.QPN)] = true
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncBuffer{}
	buf.Write(data)
	got := map[string]int{}
	other := 0
	for _, l := range buf.lines(t) {
		if l.Type != "finding" || l.Kind != apm.OneSidedRearm || l.Resolved {
			if other++; other <= 5 {
				t.Errorf("a line not of the storm's one-sided rearms: %+v", l)
			}
			continue
		}
		got[fmt.Sprintf("%s/%d", l.Host, l.QP.QPN)]++
	}
	if other > 5 {
		t.Errorf("and %d other such lines", other-5)
	}
	bad := 0
	for k, c := range got {
		if (!want[k] || c != 1) && bad < 5 {
			bad++
			t.Errorf("%s written %d times, want %d", k, c, map[bool]int{true: 1}[want[k]])
		}
	}
	missing := 0
	for k := range want {
		if got[k] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of the %d one-sided rearms have no line", missing, len(want))
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d one-sided rearms written, each once, no other line", len(want))
}

// scaleSeeds reads one host's earlier records as its publisher does at
// start (loadSeeds: about 2n/1000 ends of the host among 2n) and logs how long
// that took: the publisher waits for it, up to 30 s, before it sends.
func scaleSeeds(t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	host := hostNames[1]
	var filters []string
	for part := range wire.Partitions {
		filters = append(filters, fmt.Sprintf("%s%d.%s.>", wire.ConnPrefix, part, wire.Token(host)))
	}
	start := time.Now()
	got, err := natsconn.ReadLastSingly(t.Context(), js, filters, wire.ConnPrefix+"*."+wire.Token(host)+".>", wire.MaxTracked, func(natsconn.LastRecord) {})
	if err != nil {
		t.Fatalf("reading %s's seeds: %v", host, err)
	}
	want := 1 // its heartbeat's subject matches too (loadSeeds drops it)
	var c wire.Conn
	for i := range n {
		for side := range 2 {
			if synth(&c, i, side, time.Time{}); c.Host == host {
				want++
			}
		}
	}
	if got != want {
		t.Fatalf("%s's seeds: %d records, want %d", host, got, want)
	}
	t.Logf("n=%d: one host's %d seeds read in %v", n, got, time.Since(start).Round(time.Millisecond))
}

// scaleInstancesStorm runs the storm again (episode 2) against k
// instances sharing the partitions (APMWATCH_FLEET_SCALE_INSTANCES=k):
// each reads its share through one filter a partition (and the
// heartbeats). It logs the time until all consumed it, their CPU and
// nats-server's.
func scaleInstancesStorm(t *testing.T, h *scaleHosts, url string, server, n, k int, at time.Time) {
	t.Helper()
	var fs []*fleetProc
	dir := t.TempDir()
	for i := range k {
		fs = append(fs, startFleetProc(t, url, fmt.Sprintf("%s/findings.%d", dir, i), "--rearm-deadline="+scaleDeadline.String(),
			fmt.Sprintf("--instance=%d", i), fmt.Sprintf("--instances=%d", k), "--lease-ttl=10s"))
	}
	for _, f := range fs {
		f.waitReady(30 * time.Minute)
	}
	total := func(what func(*fleetProc) float64) (s float64) {
		for _, f := range fs {
			s += what(f)
		}
		return s
	}
	consumed := total(func(f *fleetProc) float64 { return f.metric("apmwatch_fleet_records_total") })
	cpu0 := total(func(f *fleetProc) float64 { return f.cpu().Seconds() })
	server0 := procCPU(t, server)
	h.n = 0
	wall := time.Now()
	storm := min(n, 250_000)
	h.storm(storm, at, 2, nil)
	fleettest.WaitFor(t, 30*time.Minute, "the storm consumed by every instance", func() bool {
		return total(func(f *fleetProc) float64 { return f.metric("apmwatch_fleet_records_total") }) >= consumed+float64(h.n)
	})
	t.Logf("n=%d: %d instances: storm of %d records consumed in %v; the instances' CPU %.1f s, nats-server's %v",
		n, k, h.n, time.Since(wall).Round(time.Millisecond), total(func(f *fleetProc) float64 { return f.cpu().Seconds() })-cpu0,
		procCPU(t, server)-server0)
	for _, f := range fs {
		f.stop()
	}
}
