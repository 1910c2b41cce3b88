package fleet

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// A heartbeat is hostile input: bounded, bound to its subject, dated no
// further ahead than a record may be; a refused one changes nothing.
func TestEngineRefusesBadHeartbeats(t *testing.T) {
	ok, _ := json.Marshal(wire.Heartbeat{Host: "hostA", Run: "hostA-1", At: fleettest.T0})
	for _, c := range []struct {
		why, subject string
		data         []byte
	}{
		{"too-large", wire.HeartbeatSubject("hostA"), []byte(`{"host":"hostA","run":"` + strings.Repeat("x", 2000) + `"}`)},
		{"bad-subject", "apmwatch.conn.hb.hostA.hb.1", ok},
		{"bad-subject", "apmwatch.conn.hb.host*.hb.0", ok},
		{"undecodable", wire.HeartbeatSubject("hostA"), []byte(`{"host":"hostA"`)},
		{"undecodable", wire.HeartbeatSubject("hostA"), []byte(`{"host":"hostA","run":"r"}`)}, // no time
		{"undecodable", wire.HeartbeatSubject("hostA"), []byte(`{"host":"hostA","at":"2026-12-01T10:00:00Z","run":"` + strings.Repeat("r", 200) + `"}`)},
		{"subject-mismatch", wire.HeartbeatSubject("hostB"), ok},
		{"future", wire.HeartbeatSubject("hostA"), func() []byte {
			b, _ := json.Marshal(wire.Heartbeat{Host: "hostA", Run: "r", At: fleettest.T0.Add(time.Hour)})
			return b
		}()},
	} {
		g := NewEngine(EngineConfig{}, func(Line) {})
		if why := g.TakeHeartbeat(Received{Subject: c.subject, Stored: fleettest.T0, Data: c.data}, fleettest.T0); why != c.why {
			t.Errorf("%s %s: %q, want %q", c.subject, c.data, why, c.why)
		}
		if len(g.HostClocks()) != 0 || g.Heartbeats != 0 {
			t.Errorf("%s: a refused heartbeat was taken", c.why)
		}
	}
	g := NewEngine(EngineConfig{}, func(Line) {})
	if why := g.TakeHeartbeat(Received{Subject: wire.HeartbeatSubject("hostA"), Stored: fleettest.T0.Add(time.Second), Data: ok}, fleettest.T0); why != "" {
		t.Fatal(why)
	}
	if hs := g.HostClocks(); len(hs) != 1 || hs[0].Host != "hostA" || hs[0].Offset != -time.Second || !hs[0].LastHeard.Equal(fleettest.T0.Add(time.Second)) {
		t.Fatalf("hosts: %+v", hs)
	}
}
