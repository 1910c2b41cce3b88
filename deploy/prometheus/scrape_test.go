package prometheus_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/deploy/promcheck"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/fleet"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/natsserver"
	"github.com/apmwatch/apmwatch/fleet/publish"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// The series of `apmwatch fleet` and of `apmwatch audit --publish`, which
// the lab's scrape of a plain audit does not hold. TestServiceScrapes
// checks them against the code.
const (
	fleetScrape   = "testdata/fleet.prom"
	publishScrape = "testdata/audit-publish.prom"
)

// TestServiceScrapes runs a fleet instance and two publishers against an
// embedded NATS, in this process: a one-sided pair and an unprotected pair
// are judged, and the fleet's /metrics then names exactly the apmwatch
// series of testdata/fleet.prom (so the finding kinds' series exist with
// the labels the rules select on). The publisher's series, every one its
// collector describes (a labelled counter shows only once counted), are
// those of testdata/audit-publish.prom.
func TestServiceScrapes(t *testing.T) {
	srv, err := natsserver.StartEmbedded("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	cfg := fleet.DefaultConfig()
	cfg.NATS.URL, cfg.MetricsAddr = srv.URL(), freeAddr(t)
	cfg.Engine.Deadline = time.Second
	cfg.ReadyFile = filepath.Join(t.TempDir(), "ready")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fleet.Run(ctx, cfg, io.Discard, io.Discard) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fleet: %v", err)
		}
	}()
	waitFor(t, "the fleet's ready file", func() bool { _, err := os.Stat(cfg.ReadyFile); return err == nil })

	sys := t.TempDir()
	fakePort(t, sys, "ibsim0", 1, "fe80::1")
	fakePort(t, sys, "ibsim1", 2, "fe80::2")
	a, b := publisher(t, srv.URL(), "hostA", sys), publisher(t, srv.URL(), "hostB", sys)
	a.Line(findingline.New(apm.Finding{ID: 1, Kind: apm.MissedRearm}, "hostA"))
	// QPs 100 and 200 connect, arm and migrate; hostA rearms, hostB does
	// not: one-sided. QPs 101 and 201 migrate and neither rearms:
	// unprotected.
	ends := []*end{{p: a, dev: "ibsim0", qpn: 100}, {p: b, dev: "ibsim1", qpn: 200}, {p: a, dev: "ibsim0", qpn: 101}, {p: b, dev: "ibsim1", qpn: 201}}
	ends[0].connect(2, 200)
	ends[1].connect(1, 100)
	ends[2].connect(2, 201)
	ends[3].connect(1, 101)
	a.Tick(time.Now())
	b.Tick(time.Now())
	for _, e := range ends {
		e.pathMig()
	}
	ends[0].arm()
	a.Tick(time.Now())
	b.Tick(time.Now())

	// The two hosts' records reach the fleet at their own pace: a pair may
	// be judged on the way too (one-sided while only one end's migration
	// is in), so the findings are counted at least once.
	var live []byte
	want := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^apmwatch_fleet_findings_total\{kind="one-sided-rearm",type="finding"\} [1-9]`),
		regexp.MustCompile(`(?m)^apmwatch_fleet_findings_total\{kind="unprotected-connection",type="finding"\} [1-9]`),
		regexp.MustCompile(`(?m)^apmwatch_fleet_connections\{state="one-sided"\} 1$`),
		regexp.MustCompile(`(?m)^apmwatch_fleet_connections\{state="unprotected"\} 1$`)}
	waitFor(t, "both findings and the pairs' states in the fleet's /metrics", func() bool {
		live = get(t, "http://"+cfg.MetricsAddr+"/metrics")
		for _, w := range want {
			if !w.Match(live) {
				return false
			}
		}
		return true
	})
	s, err := promcheck.ParseScrape(live)
	if err != nil {
		t.Fatal(err)
	}
	compareSeries(t, fleetScrape, apmwatchSeries(s))

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(a)
	descs := described(t, a)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&text, mf); err != nil {
			t.Fatal(err)
		}
	}
	gathered, err := promcheck.ParseScrape(text.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for sr := range gathered {
		if !descs[sr] {
			t.Errorf("gathered %v, not described", sr)
		}
	}
	if !bytes.Contains(text.Bytes(), []byte(`apmwatch_publish_queued_total{type="finding"} 1`+"\n")) {
		t.Errorf("the publisher's metrics do not count the finding line queued:\n%s", text.Bytes())
	}
	compareSeries(t, publishScrape, descs)
}

// apmwatchSeries keeps the apmwatch series of s.
func apmwatchSeries(s promcheck.Scrape) promcheck.Scrape {
	out := promcheck.Scrape{}
	for k := range s {
		if strings.HasPrefix(k.Name, "apmwatch_") {
			out[k] = true
		}
	}
	return out
}

// compareSeries fails unless the apmwatch series of the scrape in file are
// exactly got, and says what to change in the file.
func compareSeries(t *testing.T, file string, got promcheck.Scrape) {
	t.Helper()
	s, err := promcheck.ReadScrape(file)
	if err != nil {
		t.Fatal(err)
	}
	have := apmwatchSeries(s)
	var missing, extra []string
	for k := range got {
		if !have[k] {
			missing = append(missing, k.Name+"{"+k.Labels+"}")
		}
	}
	for k := range have {
		if !got[k] {
			extra = append(extra, k.Name+"{"+k.Labels+"}")
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("%s: series the code exports and the file lacks (add them): %v; series in the file the code does not export (remove them): %v", file, missing, extra)
	}
}

var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", help: ".*", constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

// described lists the series c describes: each name with its constant and
// variable label names.
func described(t *testing.T, c prometheus.Collector) promcheck.Scrape {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	out := promcheck.Scrape{}
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the descriptor %s", d)
		}
		var labels []string
		for _, part := range []string{m[2], m[3]} {
			for _, l := range strings.Split(part, ",") {
				if name, _, _ := strings.Cut(strings.TrimSpace(l), "="); name != "" {
					labels = append(labels, name)
				}
			}
		}
		slices.Sort(labels)
		out[promcheck.Series{Name: m[1], Labels: strings.Join(labels, ",")}] = true
	}
	return out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitFor polls cond every 50 ms; the limit only ends a hung test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	return b
}

// fakePort makes /sys/class/infiniband/DEV/ports/1/{lid,gids/0}.
func fakePort(t *testing.T, root, dev string, lid uint16, gid string) {
	t.Helper()
	dir := filepath.Join(root, dev, "ports", "1")
	if err := os.MkdirAll(filepath.Join(dir, "gids"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"lid": "0x" + strconv.FormatUint(uint64(lid), 16), "gids/0": gid} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func publisher(t *testing.T, url, host, sysfs string) *publish.Publisher {
	t.Helper()
	p, err := publish.NewPublisher(publish.PublishConfig{NATS: natsconn.NATSOptions{URL: url}, Host: host,
		QueueDir: filepath.Join(t.TempDir(), "q"), SysfsRoot: sysfs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(time.Second) })
	return p
}

// end is one host's QP, driven by the events the probes deliver.
type end struct {
	p    *publish.Publisher
	dev  string
	qpn  uint32
	boot uint64
}

func (e *end) ev(x *event.Event) {
	e.boot += 1000
	x.Boot, x.Time, x.Device, x.QPN = e.boot, time.Now(), e.dev, e.qpn
	e.p.Observe(x)
}

// connect takes the QP to RTR towards the peer's LID and QPN, and arms it.
func (e *end) connect(dlid uint16, dqpn uint32) {
	e.ev(&event.Event{Kind: event.KindModify, Modify: &event.Modify{QPType: event.QPTypeRC,
		AttrMask: event.AttrState | event.AttrAV | event.AttrDestQPN, State: event.StateRTR, DestQPN: dqpn,
		Primary: &event.Path{Port: 1, DLID: dlid}}})
	e.arm()
}

func (e *end) arm() {
	e.ev(&event.Event{Kind: event.KindModify, Modify: &event.Modify{QPType: event.QPTypeRC,
		AttrMask: event.AttrAltPath | event.AttrPathMigState, MigState: event.MigRearm, Alt: &event.Path{Port: 1, DLID: 9}}})
}

func (e *end) pathMig() {
	e.ev(&event.Event{Kind: event.KindQPEvent, QP: &event.QPEvent{Type: event.EvPathMig, QPType: event.QPTypeRC}})
}
