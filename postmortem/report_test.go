package postmortem

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/testkit"
)

func golden(t *testing.T, name string, got []byte) { testkit.Golden(t, name, got) }

// goldenPair writes the one-sided scenario to relative paths so the
// output does not depend on the temporary directory.
func goldenPair(t *testing.T) *Report {
	wd, _ := os.Getwd()
	testdata := filepath.Join(wd, "testdata")
	pa, pb := twoHosts(t, true, false, 0, 10, 10)
	t.Chdir(filepath.Dir(pa))
	r := run(t, Options{}, filepath.Base(pa), filepath.Base(pb))
	t.Chdir(testdata)
	t.Chdir(wd)
	return r
}

func TestGoldenJSON(t *testing.T) {
	r := goldenPair(t)
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "one-sided.json", b.Bytes())
	var back map[string]any
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("json does not read back: %v", err)
	}
}

func TestGoldenText(t *testing.T) {
	r := goldenPair(t)
	var b bytes.Buffer
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "one-sided.txt", b.Bytes())
}

func TestGoldenTextWide(t *testing.T) {
	r := goldenPair(t)
	var b bytes.Buffer
	if err := WriteTextWide(&b, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "one-sided-wide.txt", b.Bytes())
}

func TestSummaryCounts(t *testing.T) {
	r := goldenPair(t)
	s := r.Summary
	if s.Recordings != 2 || s.QPs != 2 || s.Migrations != 2 || s.Pairs != 1 || s.Lost != 2 {
		t.Fatalf("summary: %+v", s)
	}
	if s.Findings["missed-rearm"] != 1 || s.Findings["one-sided-rearm"] != 1 {
		t.Fatalf("findings by kind: %v", s.Findings)
	}
	if got := r.Recordings[0].MissingHooks; len(got) != 1 || got[0] != "cm_apr_handler" {
		t.Fatalf("missing hooks: %v", got)
	}
}

func TestFilters(t *testing.T) {
	pa, pb := twoHosts(t, true, false, 0, 10, 10)
	r := run(t, Options{QPNs: []uint32{100}}, pa, pb)
	// the pair is shown (one side matches), findings only for QP 100
	if len(r.Pairs) != 1 || len(r.QPs) != 2 {
		t.Fatalf("--qpn 100: pairs %d qps %d", len(r.Pairs), len(r.QPs))
	}
	for _, f := range r.Findings {
		if f.QP.QPN != 100 {
			t.Fatalf("--qpn 100 shows a finding of %v", f.QP)
		}
	}
	if r.Summary.Findings["one-sided-rearm"] != 1 {
		t.Fatal("the summary counts everything, before filters")
	}
	r = run(t, Options{Devices: []string{"nope"}}, pa, pb)
	if len(r.QPs) != 0 || len(r.Findings) != 0 || len(r.Pairs) != 0 {
		t.Fatalf("--device nope: %d qps %d findings", len(r.QPs), len(r.Findings))
	}
	// --until before the migration: setup entries only, no findings
	until, _, _ := ParseBound("--until", "+1s", BareFromFirst)
	r = run(t, Options{Until: until}, pa, pb)
	if len(r.Findings) != 0 {
		t.Fatalf("--until 1s shows %d findings", len(r.Findings))
	}
	for _, q := range r.QPs {
		for _, e := range q.Entries {
			if e.Kind == "qp-event" {
				t.Fatalf("--until 1s shows %s at %v", e.What, e.Time)
			}
		}
	}
	since, _, _ := ParseBound("--since", t0.Add(2*time.Second).Format(time.RFC3339Nano), BareFromFirst)
	r = run(t, Options{Since: since}, pa, pb)
	for _, q := range r.QPs {
		for _, e := range q.Entries {
			if e.Time.Before(t0.Add(2 * time.Second)) {
				t.Fatalf("--since shows %s at %v", e.What, e.Time)
			}
		}
	}
}

// The three forms of a time bound, and the bare duration read as each
// use's old meaning with a warning naming the explicit form.
func TestParseBound(t *testing.T) {
	for _, bad := range []string{"yesterday", "12:00", "--5s", "+-5s", "-", "+"} {
		if _, _, err := ParseBound("--since", bad, BareFromFirst); err == nil || !strings.HasPrefix(err.Error(), "bad --since") {
			t.Errorf("ParseBound(%q): %v", bad, err)
		}
	}
	now := t0.Add(time.Hour)
	for _, c := range []struct {
		in   string
		bare BareMeaning
		want time.Time
		warn string
	}{
		{"+1m", BareFromFirst, t0.Add(time.Minute), ""},
		{"+1m", BareBeforeNow, t0.Add(time.Minute), ""},
		{"-5s", BareFromFirst, now.Add(-5 * time.Second), ""},
		{"-5s", BareBeforeNow, now.Add(-5 * time.Second), ""},
		{"30s", BareFromFirst, t0.Add(30 * time.Second), "reads as +30s"},
		{"30s", BareBeforeNow, now.Add(-30 * time.Second), "reads as -30s"},
		{t0.Format(time.RFC3339), BareBeforeNow, t0, ""},
	} {
		b, warn, err := ParseBound("--since", c.in, c.bare)
		if err != nil || !b.Time(t0, now).Equal(c.want) || (c.warn == "") != (warn == "") || !strings.Contains(warn, c.warn) {
			t.Errorf("%q (bare %d): %v at %v, warning %q; want %v, %q", c.in, c.bare, err, b.Time(t0, now), warn, c.want, c.warn)
		}
		if want := c.want.Sub(t0) < 30*time.Minute && c.in != t0.Format(time.RFC3339); b.FromFirst() != want {
			t.Errorf("%q (bare %d): FromFirst %v, want %v", c.in, c.bare, b.FromFirst(), want)
		}
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	notRec := filepath.Join(dir, "notes.txt")
	os.WriteFile(notRec, []byte("hello, this is not a recording at all\n"), 0o644)
	empty := filepath.Join(dir, "empty.rec")
	os.WriteFile(empty, nil, 0o644)
	cases := map[string]string{
		filepath.Join(dir, "missing.rec"): "no such file",
		notRec:                            "not an apmwatch recording",
		empty:                             "empty file",
	}
	for path, want := range cases {
		_, err := Run(context.Background(), []string{path}, Options{})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line with %q", filepath.Base(path), err, want)
		}
	}
	if err := Main(context.Background(), []string{notRec}, Options{}, Output{Format: "yaml"}); err == nil || !strings.Contains(err.Error(), "bad --output") {
		t.Errorf("bad format: %v", err)
	}
}

// A recording cut in its middle replays what it holds and warns once.
func TestCutRecordingWarnsOnce(t *testing.T) {
	pa, _ := twoHosts(t, true, false, 0, 10, 10)
	b, _ := os.ReadFile(pa)
	cut := filepath.Join(t.TempDir(), "cut.rec")
	os.WriteFile(cut, b[:len(b)*2/3], 0o644)
	var warns []string
	r, err := Run(context.Background(), []string{cut}, Options{Warn: func(s string) { warns = append(warns, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 1 || !strings.HasPrefix(warns[0], "warning: ") || r.Summary.Warnings != 1 {
		t.Fatalf("warnings: %q", warns)
	}
	if r.Summary.Events == 0 || r.Summary.Events >= 20 {
		t.Fatalf("replayed %d events from a cut file", r.Summary.Events)
	}
}

// The timeline cap keeps memory bounded and says what it dropped.
func TestTimelineCap(t *testing.T) {
	b := newHost(0)
	connect(b, 5, 6, 1)
	for i := 0; i < 50; i++ {
		b.Rearm(5)
	}
	r := run(t, Options{MaxEntries: 10}, write(t, t.TempDir(), "x.rec", "h", b, 0))
	if len(r.QPs) != 1 || len(r.QPs[0].Entries) != 10 || r.QPs[0].Dropped != 44 || r.QPs[0].Rearms != 51 {
		t.Fatalf("qps: %d, entries %d dropped %d rearms %d", len(r.QPs), len(r.QPs[0].Entries), r.QPs[0].Dropped, r.QPs[0].Rearms)
	}
}

var _ = event.KindMAD
