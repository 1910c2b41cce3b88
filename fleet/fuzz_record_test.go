package fleet

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/publish"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/apmwatch/apmwatch/internal/escape"
)

// The fuzz targets of what the fleet reads from NATS (`make fuzz-fleet`
// runs them for FUZZTIME in `make test`). An input is a subject and a
// payload; the payload is split at newlines into up to fuzzMaxMsgs
// messages, all published on that subject (so that one input can pair
// two ends and walk them through an episode). Each message goes where
// JetStream would deliver it (subjectMatches), through the same code as
// the command that consumes it.

// fuzzMaxMsgs bounds the messages of one input.
const fuzzMaxMsgs = 32

func fuzzMsgs(data []byte) [][]byte {
	msgs := bytes.SplitN(data, []byte{'\n'}, fuzzMaxMsgs+1)
	return msgs[:min(len(msgs), fuzzMaxMsgs)]
}

// subjectMatches reports whether JetStream delivers a message published
// on subj to a consumer filtering on filter: subj must be a valid publish
// subject (non-empty tokens, no wildcard, no white space), "*" matches a
// token and a final ">" one or more.
func subjectMatches(filter, subj string) bool {
	if subj == "" || strings.ContainsAny(subj, " \t\r\n\f\v\x00") {
		return false
	}
	st := strings.Split(subj, ".")
	for _, s := range st {
		if s == "" || s == "*" || s == ">" {
			return false
		}
	}
	ft := strings.Split(filter, ".")
	for i, f := range ft {
		if f == ">" {
			return len(st) > i
		}
		if i >= len(st) || f != "*" && f != st[i] {
			return false
		}
	}
	return len(st) == len(ft)
}

func matchesAny(filters []string, subj string) bool {
	for _, f := range filters {
		if subjectMatches(f, subj) {
			return true
		}
	}
	return false
}

// terminalUnsafe returns the first character of s a terminal would act
// on: a control character other than the newline, DEL, a byte that is
// not UTF-8, or one of the characters escape.Text escapes (C1 controls,
// line separators, bidirectional and zero-width characters).
func terminalUnsafe(s string) (int, string, bool) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || r != '\n' && r != '\\' && escape.Text(string(r)) != string(r) {
			return i, s[i : i+n], true
		}
		i += n
	}
	return 0, "", false
}

func checkTerminal(t *testing.T, what, s string) {
	t.Helper()
	if i, c, bad := terminalUnsafe(s); bad {
		t.Fatalf("%s: %q at byte %d:\n%q", what, c, i, s[max(0, i-80):min(len(s), i+80)])
	}
}

// checkJSONLines checks output of one JSON document per line: each line
// valid JSON, nothing a terminal acts on.
func checkJSONLines(t *testing.T, what string, out []byte) {
	t.Helper()
	checkTerminal(t, what, string(out))
	if len(out) > 0 && out[len(out)-1] != '\n' {
		t.Fatalf("%s: no final newline", what)
	}
	for _, l := range bytes.Split(bytes.TrimSuffix(out, []byte{'\n'}), []byte{'\n'}) {
		if len(out) > 0 && !json.Valid(l) {
			t.Fatalf("%s: not a JSON line: %q", what, l)
		}
	}
}

var fuzzBase = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// fuzzEmit is instance.emit without NATS: the line as the fleet writes it
// to its finding log and standard output.
func fuzzEmit(t *testing.T, out *bytes.Buffer, n *int, now *time.Time) func(Line) {
	return func(l Line) {
		l.Logged = now.UTC()
		b, err := json.Marshal(escape.Value(l))
		if err != nil { // emit would drop the finding
			t.Fatalf("a finding line does not encode: %v", err)
		}
		out.Write(append(b, '\n'))
		*n++
	}
}

// FuzzConnRecord feeds connection records as they come from NATS to
// what reads them: the fleet instance's consume loop (Take: decode and
// bind to the subject, Apply,
// the 200 ms Advance, emit), `apmwatch fleet status` (ReadStatus: its
// table and JSON), `apmwatch postmortem --nats` (ReadHistory's replay:
// text and JSON) and a restarted publisher's seeds (loadSeeds, Seed,
// Flush). Nothing may panic; every output is one JSON document a line or
// text with no character a terminal acts on; the work stays in
// proportion to the input.
func FuzzConnRecord(f *testing.F) {
	sysfs := f.TempDir()
	var connFilters []string
	for p := range wire.Partitions {
		connFilters = append(connFilters, wire.ConnFilter(p))
	}
	const host = "hostA" // the publisher whose seeds these may be
	var seedFilters []string
	for p := range wire.Partitions {
		seedFilters = append(seedFilters, fmt.Sprintf("%s%d.%s.>", wire.ConnPrefix, p, wire.Token(host)))
	}
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		msgs := fuzzMsgs(data)
		if !matchesAny(connFilters, subject) {
			return // JetStream delivers it to none of them
		}
		now := fuzzBase
		var out bytes.Buffer
		lines := 0
		fleetG := NewEngine(EngineConfig{Deadline: 2 * time.Second}, fuzzEmit(t, &out, &lines, &now))
		statusG := NewEngine(EngineConfig{Deadline: time.Nanosecond}, func(Line) {})
		h := &History{NATS: "nats://fuzz", Since: fuzzBase, Until: fuzzBase.Add(time.Hour), Lines: []json.RawMessage{}, Judged: []Line{}}
		histG := NewEngine(EngineConfig{Deadline: 2 * time.Second}, func(l Line) { h.Judged = append(h.Judged, l) })
		byConn := map[string]*HistConn{}
		var seeds []wire.Conn
		seeding := matchesAny(seedFilters, subject)
		for i, m := range msgs {
			now = fuzzBase.Add(time.Duration(i) * 200 * time.Millisecond)
			// consume (the instance binds each record to its subject)
			fleetG.Take(Received{Subject: subject, Stored: now, Data: m}, now)
			fleetG.Advance(now)
			// ReadStatus (all its records are applied at one time)
			statusG.Take(Received{Subject: subject, Stored: fuzzBase, Data: m}, fuzzBase)
			// ReadHistory
			h.addRecord(histG, byConn, subject, m, now)
			// loadSeeds
			var x wire.Conn
			if seeding && len(m) <= wire.MaxRecordBytes && json.Unmarshal(m, &x) == nil && wire.ConnSubject(&x) == subject && len(seeds) < wire.MaxTracked {
				seeds = append(seeds, x)
			}
		}
		now = now.Add(time.Hour)
		fleetG.Advance(now)
		checkJSONLines(t, "finding lines", out.Bytes())
		if lines > 4*len(msgs) {
			t.Fatalf("%d finding lines from %d records", lines, len(msgs))
		}
		if fleetG.ends.n > len(msgs) {
			t.Fatalf("%d ends from %d records", fleetG.ends.n, len(msgs))
		}
		if len(fleetG.due) > 2*len(msgs) {
			t.Fatalf("%d pairs due from %d records", len(fleetG.due), len(msgs))
		}

		st := statusG.status(fuzzBase)
		var table, sj bytes.Buffer
		if err := WriteStatusTable(&table, st); err != nil {
			t.Fatalf("status table: %v", err)
		}
		checkTerminal(t, "fleet status", table.String())
		if err := json.NewEncoder(&sj).Encode(escape.Value(st)); err != nil {
			t.Fatalf("status json: %v", err)
		}
		checkJSONLines(t, "fleet status --json", sj.Bytes())

		endReplay(histG, h.Until, byConn)
		h.finish(byConn)
		checkHistory(t, h, len(data))

		tr := publish.NewTracker(host, sysfs)
		for _, c := range seeds { // this run reads the QPs back from rdma netlink
			tr.Observe(&event.Event{Kind: event.KindTruth, Device: c.Device, QPN: c.Local.QPN, Time: now, Boot: 1,
				Truth: &event.Truth{Op: event.TruthRead, QPType: event.QPTypeRC, RQPN: c.Remote.QPN, Mig: event.MigArmed}})
		}
		tr.Seed(seeds)
		for _, c := range tr.Flush(now) {
			b, err := json.Marshal(&c)
			if err != nil {
				t.Fatalf("a seeded record does not encode: %v", err)
			}
			if s := wire.ConnSubject(&c); !matchesAny(connFilters, s) {
				t.Fatalf("a seeded record's subject %q is not one the fleet reads (%s)", s, b)
			}
		}
	})
}

// checkHistory writes both forms of a postmortem of the streams and
// checks them.
func checkHistory(t *testing.T, h *History, inputLen int) {
	t.Helper()
	var text, js bytes.Buffer
	if err := WriteHistoryText(&text, h); err != nil {
		t.Fatalf("history text: %v", err)
	}
	checkTerminal(t, "postmortem --nats", text.String())
	if err := WriteHistoryJSON(&js, h); err != nil {
		t.Fatalf("history json: %v", err)
	}
	checkTerminal(t, "postmortem --nats --json", js.String())
	if !json.Valid(js.Bytes()) {
		t.Fatalf("postmortem --nats --json is not JSON:\n%s", js.Bytes())
	}
	// A record is listed once and judged a bounded number of times; a
	// string is at most 12 times its length once escaped and quoted.
	if limit := 64*inputLen + (len(h.Judged)+1)*(64<<10); text.Len() > limit || js.Len() > limit {
		t.Fatalf("history of %d bytes (text) and %d (json) from %d bytes", text.Len(), js.Len(), inputLen)
	}
}

// FuzzFindingLine feeds finding lines as they come from NATS (hosts' and
// fleet instances') to what reads them: a fleet instance starting
// (loadJudged: the IDs it must not give again), and `apmwatch postmortem
// --nats` (ReadHistory's lines, written as text and JSON). Nothing may
// panic, the outputs hold nothing a terminal acts on, and a line kept
// for the JSON report decodes to the value published.
func FuzzFindingLine(f *testing.F) {
	var judgedFilters []string
	for _, p := range (Config{Instances: 1}).partitions() {
		judgedFilters = append(judgedFilters, wire.FleetFindingSubject(p))
	}
	findings := "apmwatch.finding.>" // the findings stream's subjects
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		msgs := fuzzMsgs(data)
		if !subjectMatches(findings, subject) {
			return
		}
		now := fuzzBase
		var out bytes.Buffer
		lines := 0
		g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, fuzzEmit(t, &out, &lines, &now))
		h := &History{NATS: "nats://fuzz", Since: fuzzBase, Until: fuzzBase.Add(time.Hour), Lines: []json.RawMessage{}, Judged: []Line{}}
		judging := matchesAny(judgedFilters, subject)
		for _, m := range msgs {
			if judging {
				var l struct {
					ID uint64 `json:"id"`
				}
				if json.Unmarshal(m, &l) == nil && l.ID != 0 {
					g.MarkJudged(l.ID)
				}
			}
			n := len(h.Lines)
			h.addLine(m)
			if len(h.Lines) > n {
				var was, is any
				if err := json.Unmarshal(m, &was); err != nil {
					t.Fatalf("a line kept does not decode: %v", err)
				}
				if err := json.Unmarshal(h.Lines[n], &is); err != nil || !reflect.DeepEqual(was, is) {
					t.Fatalf("a line kept is not the line published: %v\n got %q\nwant %q", err, h.Lines[n], m)
				}
			}
		}
		if len(g.judged) > len(msgs) || len(h.Lines) > len(msgs) {
			t.Fatalf("%d IDs and %d lines kept from %d messages", len(g.judged), len(h.Lines), len(msgs))
		}
		// then the instance consumes a one-sided pair: judged unless the
		// lines named its finding
		a, b := fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
		for _, c := range []wire.Conn{a, b, fleettest.Migrated(a, fuzzBase.Add(time.Second)), fleettest.Migrated(b, fuzzBase.Add(time.Second)),
			fleettest.Rearmed(fleettest.Migrated(a, fuzzBase.Add(time.Second)), fuzzBase.Add(2*time.Second))} {
			g.Apply(&c, now)
		}
		now = now.Add(time.Minute)
		g.Advance(now)
		checkJSONLines(t, "finding lines", out.Bytes())
		if lines > 1 {
			t.Fatalf("%d findings of one pair", lines)
		}
		h.finish(map[string]*HistConn{})
		checkHistory(t, h, len(data))
	})
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpora in testdata/fuzz/FuzzConnRecord and FuzzFindingLine")

type fuzzSeed struct {
	subject string
	data    []byte
}

func joinRecords(t *testing.T, cs ...wire.Conn) []byte {
	var out [][]byte
	for i := range cs {
		b, err := json.Marshal(&cs[i])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return bytes.Join(out, []byte{'\n'})
}

// connSeeds are real records (as the tracker publishes them: pairs
// armed, one-sided, unprotected, GID-routed, gone) and hostile ones.
func connSeeds(t *testing.T) map[string]fuzzSeed {
	at := func(s int) time.Time { return fuzzBase.Add(time.Duration(s) * time.Second) }
	a, b := fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
	a.Run, b.Run = "hostA-t0", "hostB-t0"
	a.Mig, a.MigRead, a.PID, a.Comm, a.State = "ARMED", at(0), 4242, "app", "RTS"
	subj := wire.ConnSubject(&a)
	am, bm := fleettest.Migrated(a, at(1)), fleettest.Migrated(b, at(1))
	g1 := wire.Conn{Host: "gpu01", Device: "mlx5_0", Port: 1, Type: "RC", Global: true, Local: wire.Addr{GID: "fe80::a:1", QPN: 0x1234},
		Remote: wire.Addr{GID: "fe80::b:1", QPN: 0x4321}, APM: true, Armed: true, Changed: at(0), At: at(0), Rev: 1, Run: "gpu01-x"}
	g2 := wire.Conn{Host: "gpu02", Device: "mlx5_0", Port: 1, Type: "RC", Global: true, Local: wire.Addr{GID: "fe80::b:1", QPN: 0x4321},
		Remote: wire.Addr{GID: "fe80::a:1", QPN: 0x1234}, APM: true, Armed: false, Changed: at(0), At: at(0), Rev: 1, Run: "gpu02-x"}
	gone := b
	gone.Gone, gone.At, gone.Rev = true, at(9), 9
	hostile := a
	hostile.Host, hostile.Device, hostile.Comm = "host\x1b[2J\u009b1m", "mlx5\u202e0\u200b", "a\nb"
	hb := b
	hb.Host = "\x7fhostB\xff" // invalid UTF-8: decoded as U+FFFD
	flap := fleettest.Migrated(fleettest.Migrated(a, at(1)), at(2))
	for i := range 20 {
		flap.Episode.Migrations = append(flap.Episode.Migrations, at(3+i))
	}
	flap.Episode.N = 1 << 31
	return map[string]fuzzSeed{
		"armed-pair":      {subj, joinRecords(t, a, b)},
		"one-sided":       {subj, joinRecords(t, a, b, am, bm, fleettest.Rearmed(am, at(2)))},
		"one-sided-fixed": {subj, joinRecords(t, a, b, am, bm, fleettest.Rearmed(am, at(2)), fleettest.Rearmed(bm, at(10)))},
		"unprotected":     {subj, joinRecords(t, a, b, am, bm)},
		"global-pair":     {wire.ConnSubject(&g1), joinRecords(t, g1, g2)},
		"gone":            {subj, joinRecords(t, a, b, gone)},
		"hostile-names":   {subj, joinRecords(t, hostile, hb, fleettest.Migrated(hostile, at(1)), fleettest.Migrated(hb, at(1)), fleettest.Rearmed(fleettest.Migrated(hb, at(1)), at(2)))},
		"flapping":        {subj, joinRecords(t, flap, b)},
		"stale":           {subj, joinRecords(t, fleettest.Rearmed(am, at(2)), a, b)},
		"times": {"apmwatch.conn.63.x.y.1", []byte(`{"host":"h","device":"d","local":{"lid":1,"qpn":1},"remote":{"lid":2,"qpn":2},` +
			`"apm":true,"changed":"0001-01-01T00:00:00Z","episode":{"n":1,"migrations":["9999-12-31T23:59:59.999999999Z"]},` +
			`"at":"2262-04-11T23:47:16.854775807Z","rev":18446744073709551615,"port":4294967295}` + "\n" +
			`{"host":"h2","device":"d","local":{"lid":2,"qpn":2},"remote":{"lid":1,"qpn":1},"apm":true,"armed":true,` +
			`"changed":"1677-09-21T00:12:43.145224192Z","at":"1600-01-01T00:00:00Z","episode":{"n":0,"rearm":"0001-01-01T00:00:01Z"}}`)},
		"raw-controls": {subj, []byte("{\"host\":\"\xc2\x9b31m\x7f\",\"device\":\"d\\u0000\\u001b]0;x\\u0007\",\"local\":{\"gid\":\"fe80::1\",\"lid\":1,\"qpn\":5}," +
			"\"remote\":{\"lid\":2,\"qpn\":6},\"apm\":true,\"at\":\"2026-12-01T10:00:00Z\",\"rev\":1,\"mig_state\":\"MIGRATED\"}")},
		"not-a-record": {subj, []byte("{not json\n\nnull\n[]\n{}\n\"x\"\n{\"local\":{\"qpn\":-1}}")},
		"bad-subject":  {"apmwatch.conn.1.*.d.1", joinRecords(t, a)},
	}
}

// lineSeeds are real finding lines (the fleet's own, a host's from
// docs/audit.md) and hostile ones.
func lineSeeds(t *testing.T) map[string]fuzzSeed {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a, b := fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
	am, bm := fleettest.Migrated(a, fuzzBase.Add(time.Second)), fleettest.Migrated(b, fuzzBase.Add(time.Second))
	for _, c := range []wire.Conn{a, b, am, bm, fleettest.Rearmed(am, fuzzBase.Add(2*time.Second))} {
		g.Apply(&c, fuzzBase)
	}
	g.Advance(fuzzBase.Add(time.Minute))
	bf := fleettest.Rearmed(bm, fuzzBase.Add(time.Hour))
	g.Apply(&bf, fuzzBase.Add(time.Hour))
	if len(got) != 2 {
		t.Fatalf("the seed scenario gave %d lines, want a finding and its resolution", len(got))
	}
	var fleetLines [][]byte
	for _, l := range got {
		l.Logged = fuzzBase.Add(time.Minute)
		bs, err := json.Marshal(escape.Value(l))
		if err != nil {
			t.Fatal(err)
		}
		fleetLines = append(fleetLines, bs)
	}
	host := []byte(`{"type":"finding","logged":"2026-11-29T14:42:35.33985954Z","host":"node17","bundle":"/var/lib/apmwatch/incidents/20261129T144235.340Z-missed-rearm-mlx5_0-17","id":1,"kind":"missed-rearm","severity":"error","qp":{"device":"mlx5_0","qpn":17,"gen":1},"pid":246,"comm":"app","first_boot_ns":9723265492,"last_boot_ns":11723265492,"first_time":"2026-11-29T14:42:33.024952826Z","last_time":"2026-11-29T14:42:35.024952826Z","evidence":[{"seq":11,"boot_ns":9723265492,"what":"forced migration (modify PATH_MIG_STATE=MIGRATED)"},{"seq":12,"boot_ns":9729817980,"what":"PATH_MIG"}],"explanation":"migration 1 was not followed by a rearm within 2s","remediation":"rearm"}` + "\n" +
		`{"type":"resolution","logged":"2026-11-29T14:42:40Z","host":"node17","id":3,"kind":"missed-rearm","severity":"info","qp":{"device":"mlx5_0","qpn":17,"gen":1},"resolved":true,"resolves":1,"unprotected_ns":5000002000}`)
	return map[string]fuzzSeed{
		"fleet-finding":    {wire.FleetFindingSubject(got[0].Partition), bytes.Join(fleetLines, []byte{'\n'})},
		"host-finding":     {wire.HostFindingSubject("node17"), host},
		"raw-controls":     {wire.HostFindingSubject("evil"), []byte("{\"type\":\"finding\",\"logged\":\"2026-11-29T14:42:35Z\",\"host\":\"\xc2\x9b2J\x7f\xe2\x80\xae\xff\",\"kind\":\"x\\u001b[31m\",\"id\":7,\"qp\":{\"device\":\"d\\u0085\",\"qpn\":1},\"explanation\":\"a\\nb\xe2\x80\xa8c\",\"peer\":{\"host\":\"\xef\xbb\xbfp\",\"device\":\"\",\"qpn\":2}}")},
		"odd-values":       {wire.FleetFindingSubject(0), []byte("{\"id\":9007199254740993,\"logged\":\"10000-01-01T00:00:00Z\"}\n{\"id\":\"7\"}\n{\"id\":-1}\n[1,2]\nnull\n{\"peer\":null,\"qp\":[]}\n{not json")},
		"judged-before":    {wire.FleetFindingSubject(got[0].Partition), fleetLines[0]},
		"deep":             {wire.HostFindingSubject("x"), []byte(strings.Repeat("[", 2000) + strings.Repeat("]", 2000))},
		"not-a-stream-sub": {"apmwatch.finding", fleetLines[0]},
	}
}

func writeCorpus(t *testing.T, name string, seeds map[string]fuzzSeed) {
	dir := filepath.Join("testdata", "fuzz", name)
	if !*updateCorpus {
		for s := range seeds {
			if _, err := os.Stat(filepath.Join(dir, s)); err != nil {
				t.Errorf("seed %s/%s missing: go test ./fleet -run TestFleetSeedCorpora -update-corpus", name, s)
			}
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for s, v := range seeds {
		body := fmt.Sprintf("go test fuzz v1\nstring(%q)\n[]byte(%q)\n", v.subject, v.data)
		if err := os.WriteFile(filepath.Join(dir, s), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFleetSeedCorpora checks the committed seed corpora of FuzzConnRecord
// and FuzzFindingLine are there, and writes them with -update-corpus.
func TestFleetSeedCorpora(t *testing.T) {
	writeCorpus(t, "FuzzConnRecord", connSeeds(t))
	writeCorpus(t, "FuzzFindingLine", lineSeeds(t))
}

// The fuzz targets' model of JetStream's subject matching.
func TestSubjectMatches(t *testing.T) {
	for _, tc := range []struct {
		filter, subj string
		want         bool
	}{
		{"apmwatch.conn.3.>", "apmwatch.conn.3.h.d.17", true},
		{"apmwatch.conn.3.>", "apmwatch.conn.3", false},
		{"apmwatch.conn.3.>", "apmwatch.conn.30.h.d.17", false},
		{"apmwatch.conn.*.hostA.>", "apmwatch.conn.9.hostA.d.1", true},
		{"apmwatch.conn.*.hostA.>", "apmwatch.conn.9.hostB.d.1", false},
		{"apmwatch.finding.fleet.4", "apmwatch.finding.fleet.4", true},
		{"apmwatch.finding.fleet.4", "apmwatch.finding.fleet.4.x", false},
		{"apmwatch.finding.>", "apmwatch.finding.host.a b", false},
		{"apmwatch.finding.>", "apmwatch.finding..x", false},
		{"apmwatch.finding.>", "apmwatch.finding.*", false},
	} {
		if got := subjectMatches(tc.filter, tc.subj); got != tc.want {
			t.Errorf("%s on %s: %v", tc.filter, tc.subj, got)
		}
	}
}

// What postmortem --nats keeps of finding lines is bounded and safe to
// print: terminal controls become JSON escapes of the same value, deep
// lines are skipped, and the lines' bytes stop at maxHistLineBytes.
func TestHistoryLinesBoundedAndEscaped(t *testing.T) {
	h := &History{Lines: []json.RawMessage{}}
	h.addLine([]byte("{\"host\":\"\xc2\x9b2J\x7f\xe2\x80\xae\xff\",\"kind\":\"x\\u001b\"}"))
	h.addLine([]byte(strings.Repeat("[", maxLineDepth+1) + strings.Repeat("]", maxLineDepth+1)))
	if len(h.Lines) != 1 || string(h.Lines[0]) != `{"host":"\u009b2J\u007f\u202e\ufffd","kind":"x\u001b"}` {
		t.Fatalf("lines kept: %q", h.Lines)
	}
	big := []byte(`{"explanation":"` + strings.Repeat("x", 1<<20) + `"}`)
	for !h.Truncated {
		h.addLine(big)
	}
	if n := len(h.Lines); n < maxHistLineBytes/len(big)-1 || n > maxHistLineBytes/len(big)+1 {
		t.Fatalf("%d lines of %d bytes kept", n, len(big))
	}
	hc := map[string]*HistConn{}
	g := NewEngine(EngineConfig{Deadline: time.Second}, func(Line) {})
	c := fleettest.Conn(strings.Repeat("h", 1000), 1, 17, 2, 18)
	b, _ := json.Marshal(&c)
	h.addRecord(g, hc, wire.ConnSubject(&c), b, fuzzBase)
	if len(hc) != 1 {
		t.Fatalf("a record of a 1000-character host not listed: %+v", h.Refused)
	}
	for _, x := range hc {
		if len(x.Records) != 1 || len(x.Records[0].Host) != maxNameLen {
			t.Fatalf("records kept: %+v", x.Records)
		}
	}
}
