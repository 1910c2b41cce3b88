package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
)

// A host that stops heartbeating is silent after --silent-after: one
// host-silent line naming it, when it was last heard and its ends; its
// metric; fleet status shows its connections unknown, never armed; its
// one-sided pair is not judged on its silence. Heard again (its rearm,
// then its heartbeats): the resolution, and the pair, armed, is not
// judged.
func TestFleetHostSilentAndHeardAgain(t *testing.T) {
	url := fleettest.NATS(t)
	addr := fleettest.FreePort(t)
	f := startFleetWith(t, url, 0, 1, func(c *Config) { c.Engine.SilentAfter, c.MetricsAddr = time.Second, addr })
	defer f.stop()
	a, b, ea, eb := migratedPair(t, url)
	b.stopBeats() // hostB falls silent
	a.rearm(ea)   // one-sided from here: hostB's end said nothing since

	fleettest.WaitFor(t, 30*time.Second, "host-silent", func() bool { return len(f.out.lines(t)) > 0 })
	fleettest.WaitFor(t, 30*time.Second, "the metric", func() bool {
		v, ok := metric(t, addr, `apmwatch_fleet_host_silent{host="hostB"}`)
		return ok && v == 1
	})
	ls := f.out.lines(t)
	l := ls[0]
	if len(ls) != 1 || l.Kind != apm.HostSilent || l.Type != "finding" || l.Severity != "error" || l.Host != "hostB" ||
		!strings.Contains(l.Explain, "its 1 connection ends") || len(l.Evidence) != 1 || !strings.Contains(l.Evidence[0].What, "last heard at") {
		t.Fatalf("lines: %+v", ls)
	}
	if v, ok := metric(t, addr, `apmwatch_fleet_host_silent{host="hostA"}`); !ok || v != 0 {
		t.Fatalf("hostA silent: %v %v", v, ok)
	}
	heard, ok := metric(t, addr, `apmwatch_fleet_host_last_heard_seconds{host="hostB"}`)
	if !ok || time.Since(time.Unix(0, int64(heard*1e9))) < time.Second {
		t.Fatalf("hostB last heard %v (%v): less than --silent-after ago", heard, ok)
	}
	st, err := ReadStatusSilentAfter(context.Background(), natsconn.NATSOptions{URL: url}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Rows) != 1 || st.Rows[0].State != "unknown" || !st.Rows[0].SilentB || st.Rows[0].ArmedB || st.Rows[0].SilentA ||
		st.ByState["unknown"] != 1 || st.ByState["one-sided"] != 0 {
		t.Fatalf("status: %+v", st)
	}
	var tab strings.Builder
	if err := WriteStatusFit(&tab, st); err != nil {
		t.Fatal(err)
	}
	bRow := ""
	for _, r := range strings.Split(tab.String(), "\n") {
		if strings.Contains(r, "hostB") && strings.Contains(r, "200") {
			bRow = r
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(bRow), "unknown") || !strings.HasPrefix(tab.String(), "STATE") || !strings.Contains(tab.String(), "\nunknown ") ||
		!strings.Contains(tab.String(), "0 connections cannot fail over") || !strings.Contains(tab.String(), "2 hosts heard, 1 silent: 1 connections unknown") ||
		!strings.Contains(tab.String(), "host hostB: silent since") {
		t.Fatalf("table:\n%s", tab.String())
	}
	if ls := f.out.lines(t); len(ls) != 1 {
		t.Fatalf("judged while hostB was silent: %+v", ls[1:])
	}

	b.rearm(eb) // heard again: its rearm, then its heartbeats
	b.startBeats()
	fleettest.WaitFor(t, 30*time.Second, "the resolution", func() bool { return len(f.out.lines(t)) > 1 })
	fleettest.WaitFor(t, 30*time.Second, "the metric", func() bool {
		v, ok := metric(t, addr, `apmwatch_fleet_host_silent{host="hostB"}`)
		return ok && v == 0
	})
	ls = f.out.lines(t)
	if len(ls) != 2 || ls[1].Type != "resolution" || ls[1].Kind != apm.HostSilent || ls[1].Resolves != l.ID || ls[1].Host != "hostB" {
		t.Fatalf("lines: %+v", ls)
	}
}
