package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/publish"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// twoLoggedHosts is twoHosts with each publisher's log kept.
func twoLoggedHosts(t *testing.T, url string, alog, blog *syncBuffer) (a, b *publish.Publisher) {
	t.Helper()
	sys := t.TempDir()
	fleettest.FakeSysfs(t, sys, "ibsim0", 1, "fe80::1")
	fleettest.FakeSysfs(t, sys, "ibsim1", 2, "fe80::2")
	mk := func(host string, log *syncBuffer) *publish.Publisher {
		p, err := publish.NewPublisher(publish.PublishConfig{NATS: natsconn.NATSOptions{URL: url}, Host: host,
			QueueDir: filepath.Join(t.TempDir(), "q"), SysfsRoot: sys, HeartbeatEvery: testHeartbeat,
			Log: slog.New(slog.NewTextHandler(log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close(time.Second) })
		return p
	}
	return mk("hostA", alog), mk("hostB", blog)
}

// explain logs, for a round that did not write all its lines, the QPNs
// whose line is missing, the last record the stream holds of each of
// their ends, and the publishers' logs: whether a record never reached
// the stream or the judge did not judge what it read.
func (r *clusterRun) explain(qa, qb uint32, n int) {
	got := hostBQPNs(r.t, r.written())
	for i := range uint32(n) {
		if slices.Contains(got, qb+i) {
			continue
		}
		r.t.Logf("no line for hostB QPN %d: stream holds %s; %s", qb+i,
			r.lastRecord("hostA", "ibsim0", qa+i), r.lastRecord("hostB", "ibsim1", qb+i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s, err := ReadStatus(ctx, natsconn.NATSOptions{URL: r.cl.URL()}); err != nil {
		r.t.Logf("fleet status: %v", err)
	} else {
		r.t.Logf("fleet status from the stream: %d ends, %d unpaired, %v; hosts (watermarks): %+v", s.Ends, s.Unpaired, s.ByState, s.Hosts)
	}
	r.t.Logf("hostA's publisher log:\n%s", r.alog.tail(30))
	r.t.Logf("hostB's publisher log:\n%s", r.blog.tail(30))
}

// lastRecord describes the last record stored for one end.
func (r *clusterRun) lastRecord(host, dev string, qpn uint32) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js := fleettest.JetStream(r.t, r.cl.URL())
	s, err := js.Stream(ctx, wire.ConnStream)
	if err != nil {
		return fmt.Sprintf("%s/%d: %v", host, qpn, err)
	}
	subj := fmt.Sprintf("%s*.%s.%s.%d", wire.ConnPrefix, wire.Token(host), wire.Token(dev), qpn)
	m, err := s.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		return fmt.Sprintf("%s/%d: %v", host, qpn, err)
	}
	var c wire.Conn
	if err := json.Unmarshal(m.Data, &c); err != nil {
		return fmt.Sprintf("%s/%d seq %d: %v", host, qpn, m.Sequence, err)
	}
	return fmt.Sprintf("%s/%d seq %d rev %d armed %v apm %v episode %+v behind %q", host, qpn, m.Sequence, c.Rev, c.Armed, c.APM, c.Episode, m.Header.Get(wire.BehindHeader))
}
