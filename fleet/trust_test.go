package fleet

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// take hands g the record c as stored on subject at at.
func take(t *testing.T, g *Engine, c wire.Conn, subject string, at time.Time) string {
	t.Helper()
	b, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	_, why := g.Take(Received{Subject: subject, Stored: at, Data: b}, at)
	return why
}

// own hands g the record on its own subject.
func own(t *testing.T, g *Engine, c wire.Conn, at time.Time) string {
	t.Helper()
	return take(t, g, c, wire.ConnSubject(&c), at)
}

// posing is hostC's record of the end of c: c as hostC would write it on
// its own subject.
func posing(c wire.Conn) (wire.Conn, string) {
	c.Host, c.Run = "hostC", "hostC-1"
	return c, wire.ConnSubject(&c)
}

func TestTakeBindsTheRecordToItsSubject(t *testing.T) {
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, func(Line) {})
	a := fleettest.Conn("hostA", 1, 17, 2, 18)
	subj := wire.ConnSubject(&a)
	for _, c := range []struct {
		what    string
		subject string
		data    []byte
		want    string
	}{
		{"another host's name", subj, mustJSON(t, with(a, func(c *wire.Conn) { c.Host = "hostB" })), "subject-mismatch"},
		{"another device", subj, mustJSON(t, with(a, func(c *wire.Conn) { c.Device = "ibsim1" })), "subject-mismatch"},
		{"another QPN", subj, mustJSON(t, with(a, func(c *wire.Conn) { c.Local.QPN = 19 })), "subject-mismatch"},
		{"another partition", subj, mustJSON(t, with(a, func(c *wire.Conn) { c.Remote.QPN = 99 })), "subject-mismatch"},
		{"a subject publishers do not write", wire.ConnPrefix + "64.hostA.ibsim0.17", mustJSON(t, a), "bad-subject"},
		{"a wildcard", wire.ConnPrefix + "1.*.ibsim0.17", mustJSON(t, a), "bad-subject"},
		{"not a record", subj, []byte("{not json"), "undecodable"},
		{"too large", subj, []byte(`{"comm":"` + strings.Repeat("x", wire.MaxRecordBytes) + `"}`), "too-large"},
		{"its own", subj, mustJSON(t, a), ""},
	} {
		if _, why := g.Take(Received{Subject: c.subject, Stored: fleettest.T0, Data: c.data}, fleettest.T0); why != c.want {
			t.Errorf("%s: refused %q, want %q", c.what, why, c.want)
		}
	}
	if g.Stats().Ends != 1 || g.Refused[refusedMismatch] != 4 || g.Refused[refusedBadSubject] != 2 {
		t.Fatalf("%d ends, refused %v", g.Stats().Ends, g.RefusedBy())
	}
}

func with(c wire.Conn, f func(*wire.Conn)) wire.Conn { f(&c); return c }

func mustJSON(t *testing.T, c wire.Conn) []byte {
	b, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// oneSidedPair takes hostA's and hostB's ends through a migration that
// only hostA's end rearms from.
func oneSidedPair(t *testing.T, g *Engine, m time.Time) (a, b wire.Conn) {
	a, b = fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
	a.Run, b.Run = "hostA-1", "hostB-1"
	own(t, g, a, m)
	own(t, g, b, m)
	a, b = fleettest.Rearmed(fleettest.Migrated(a, m), m.Add(100*time.Millisecond)), fleettest.Migrated(b, m)
	own(t, g, a, m)
	own(t, g, b, m)
	return a, b
}

// Another host that claims hostB's end (armed, on its own subject, or on
// its own subject in hostB's name) cannot hide hostB's one-sided rearm.
func TestOneHostCannotHideAnothersOneSidedRearm(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	m := fleettest.T0.Add(time.Minute)
	_, b := oneSidedPair(t, g, m)
	hide, subj := posing(fleettest.Rearmed(b, m.Add(time.Second)))
	if why := take(t, g, hide, subj, m.Add(time.Second)); why != "claimed" {
		t.Fatalf("hostC's claim on hostB's end: refused %q", why)
	}
	inName := hide
	inName.Host = "hostB"
	if why := take(t, g, inName, subj, m.Add(time.Second)); why != "subject-mismatch" {
		t.Fatalf("hostC's record in hostB's name: refused %q", why)
	}
	g.Advance(m.Add(3 * time.Second))
	if len(got) != 1 || got[0].Kind != apm.OneSidedRearm || got[0].Host != "hostB" {
		t.Fatalf("findings: %+v", got)
	}
	if cl := g.Claims(); len(cl) != 1 || cl[0].Owner != "hostB" || cl[0].Claimant != "hostC" {
		t.Fatalf("claims: %+v", cl)
	}
}

// Another host cannot make an armed pair one-sided by claiming one of
// its ends unarmed after a migration.
func TestOneHostCannotInventAOneSidedRearm(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a, b := fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
	own(t, g, a, fleettest.T0)
	own(t, g, b, fleettest.T0)
	fake, subj := posing(fleettest.Migrated(b, fleettest.T0.Add(time.Second)))
	if why := take(t, g, fake, subj, fleettest.T0.Add(time.Second)); why != "claimed" {
		t.Fatalf("hostC's claim: refused %q", why)
	}
	g.Advance(fleettest.T0.Add(time.Minute))
	if len(got) != 0 || g.Stats().ByState[StateArmed] != 1 {
		t.Fatalf("findings %+v, states %+v", got, g.Stats())
	}
}

// Only an end's owner marks it gone.
func TestOneHostCannotMarkAnothersEndsGone(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	m := fleettest.T0.Add(time.Minute)
	_, b := oneSidedPair(t, g, m)
	gone, subj := posing(b)
	gone.Gone, gone.Rev = true, b.Rev+1
	if why := take(t, g, gone, subj, m.Add(time.Second)); why != "claimed" {
		t.Fatalf("hostC's gone of hostB's end: refused %q", why)
	}
	g.Advance(m.Add(3 * time.Second))
	if g.Stats().Ends != 2 || len(got) != 1 || got[0].Host != "hostB" {
		t.Fatalf("%d ends, findings %+v", g.Stats().Ends, got)
	}
	// once hostB says its end is gone, the key is free
	bg := b
	bg.Gone, bg.Rev = true, b.Rev+1
	own(t, g, bg, m.Add(4*time.Second))
	c, subj := posing(fleettest.Conn("hostB", 2, 18, 1, 17))
	if why := take(t, g, c, subj, m.Add(5*time.Second)); why != "" {
		t.Fatalf("hostC's claim of a key hostB gave up: refused %q", why)
	}
}

// A gone record of another host's run, for an end no one holds, lays a
// tombstone that binds only the host that sent it: the end's records are
// taken when they come.
func TestAnotherHostsGoneBuriesNothingOfAnEndsHost(t *testing.T) {
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, func(Line) {})
	b := fleettest.Conn("hostB", 2, 18, 1, 17)
	b.Run = "hostB-1"
	gone, subj := posing(b)
	gone.Run, gone.Rev, gone.Gone = "hostB-1", 1000, true // hostB's run, as read from the stream
	if why := take(t, g, gone, subj, fleettest.T0); why != "" {
		t.Fatalf("a gone of an end no one holds: refused %q", why)
	}
	if why := own(t, g, b, fleettest.T0.Add(time.Second)); why != "" || g.Stats().Ends != 1 || g.Stale != 0 {
		t.Fatalf("hostB's record after it: refused %q, %d ends, %d stale", why, g.Stats().Ends, g.Stale)
	}
}

// A record dated a year ahead is refused: it neither takes the end from
// its host nor holds the host's records back.
func TestARecordDatedAYearAheadDoesNotFreezeAnotherHost(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	m := fleettest.T0.Add(time.Minute)
	ahead, subj := posing(fleettest.Conn("hostB", 2, 18, 1, 17))
	ahead.At, ahead.Changed = m.AddDate(1, 0, 0), m.AddDate(1, 0, 0)
	if why := take(t, g, ahead, subj, m); why != "future" {
		t.Fatalf("a record a year ahead: refused %q", why)
	}
	own := fleettest.Conn("hostB", 2, 18, 1, 17)
	own.At = m.Add(DefaultMaxSkew + time.Second) // its own host's, past the skew too
	if why := take(t, g, own, wire.ConnSubject(&own), m); why != "future" {
		t.Fatalf("hostB's record past the skew: refused %q", why)
	}
	oneSidedPair(t, g, m)
	g.Advance(m.Add(3 * time.Second))
	if len(got) != 1 || got[0].Host != "hostB" || g.Refused[refusedFuture] != 2 {
		t.Fatalf("findings %+v, refused %v", got, g.RefusedBy())
	}
	fm := newFleetMetrics()
	fm.update(g)
	fm.update(g)
	if n := testutil.ToFloat64(fm.refused.WithLabelValues("future")); n != 2 {
		t.Fatalf("records_refused_total{reason=future} = %v", n)
	}
}

// One host holds at most MaxEndsPerHost ends; a gone one frees a place.
func TestTakeBoundsTheEndsOfAHost(t *testing.T) {
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second, MaxEndsPerHost: 3}, func(Line) {})
	var cs []wire.Conn
	for i := range 4 {
		c := fleettest.Conn("hostA", 1, uint32(100+i), 2, 18)
		c.Run = "hostA-1"
		cs = append(cs, c)
	}
	for i, c := range cs {
		want := ""
		if i == 3 {
			want = "host-ends"
		}
		if why := own(t, g, c, fleettest.T0); why != want {
			t.Fatalf("end %d: refused %q, want %q", i, why, want)
		}
	}
	if why := own(t, g, fleettest.Conn("hostB", 2, 18, 1, 100), fleettest.T0); why != "" {
		t.Fatalf("another host's end: refused %q", why)
	}
	gone := cs[0]
	gone.Gone, gone.Rev = true, 2
	own(t, g, gone, fleettest.T0)
	if why := own(t, g, cs[3], fleettest.T0); why != "" {
		t.Fatalf("after a gone: refused %q", why)
	}
}

// fleet status refuses another host's claims on an end, and says so.
func TestStatusRefusesAnotherHostsClaims(t *testing.T) {
	for name, url := range fleettest.NATSServers(t) {
		t.Run(name, func(t *testing.T) {
			js := fleettest.JS(t, url)
			m := fleettest.Base.Add(time.Minute)
			a, b := fleettest.Dated(fleettest.Conn("hostA", 1, 17, 2, 18)), fleettest.Dated(fleettest.Conn("hostB", 2, 18, 1, 17))
			a.Run, b.Run = "hostA-1", "hostB-1"
			a, b = fleettest.Rearmed(fleettest.Migrated(a, m), m.Add(100*time.Millisecond)), fleettest.Migrated(b, m)
			hide, _ := posing(fleettest.Rearmed(b, m.Add(time.Second)))
			gone, _ := posing(a)
			gone.Gone, gone.Rev = true, a.Rev+1
			ahead, _ := posing(fleettest.Dated(fleettest.Conn("hostD", 4, 40, 5, 50)))
			ahead.At = time.Now().AddDate(1, 0, 0)
			fleettest.Store(t, js, a, b, hide, gone, ahead)
			st, err := ReadStatus(context.Background(), natsconn.NATSOptions{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Rows) != 1 || st.Rows[0].State != "one-sided" || st.Rows[0].B.Host != "hostB" || st.Ends != 2 ||
				st.Refused["claimed"] != 2 || st.Refused["future"] != 1 || len(st.Claims) != 2 {
				t.Fatalf("status: rows %+v, %d ends, refused %v, claims %+v", st.Rows, st.Ends, st.Refused, st.Claims)
			}
			var tab strings.Builder
			if err := WriteStatusTable(&tab, st); err != nil || !strings.Contains(tab.String(), "3 records refused (1 future, 2 claimed;") {
				t.Fatalf("table: %v\n%s", err, tab.String())
			}
		})
	}
}
