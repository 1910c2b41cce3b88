package fleet

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A heartbeat is hostile input: bounded, bound to its subject, dated no
// further ahead than a record may be; a refused one changes nothing.
func TestEngineRefusesBadHeartbeats(t *testing.T) {
	ok, _ := json.Marshal(Heartbeat{Host: "hostA", Run: "hostA-1", At: t0})
	for _, c := range []struct {
		why, subject string
		data         []byte
	}{
		{"too-large", HeartbeatSubject("hostA"), []byte(`{"host":"hostA","run":"` + strings.Repeat("x", 2000) + `"}`)},
		{"bad-subject", "apmwatch.conn.hb.hostA.hb.1", ok},
		{"bad-subject", "apmwatch.conn.hb.host*.hb.0", ok},
		{"undecodable", HeartbeatSubject("hostA"), []byte(`{"host":"hostA"`)},
		{"undecodable", HeartbeatSubject("hostA"), []byte(`{"host":"hostA","run":"r"}`)}, // no time
		{"undecodable", HeartbeatSubject("hostA"), []byte(`{"host":"hostA","at":"2026-12-01T10:00:00Z","run":"` + strings.Repeat("r", 200) + `"}`)},
		{"subject-mismatch", HeartbeatSubject("hostB"), ok},
		{"future", HeartbeatSubject("hostA"), func() []byte {
			b, _ := json.Marshal(Heartbeat{Host: "hostA", Run: "r", At: t0.Add(time.Hour)})
			return b
		}()},
	} {
		g := NewEngine(EngineConfig{}, func(Line) {})
		if why := g.TakeHeartbeat(Received{Subject: c.subject, Stored: t0, Data: c.data}, t0); why != c.why {
			t.Errorf("%s %s: %q, want %q", c.subject, c.data, why, c.why)
		}
		if len(g.HostClocks()) != 0 || g.Heartbeats != 0 {
			t.Errorf("%s: a refused heartbeat was taken", c.why)
		}
	}
	g := NewEngine(EngineConfig{}, func(Line) {})
	if why := g.TakeHeartbeat(Received{Subject: HeartbeatSubject("hostA"), Stored: t0.Add(time.Second), Data: ok}, t0); why != "" {
		t.Fatal(why)
	}
	if hs := g.HostClocks(); len(hs) != 1 || hs[0].Host != "hostA" || hs[0].Offset != -time.Second || !hs[0].LastHeard.Equal(t0.Add(time.Second)) {
		t.Fatalf("hosts: %+v", hs)
	}
}
