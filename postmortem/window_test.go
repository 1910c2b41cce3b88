package postmortem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
)

func bound(t *testing.T, flag, v string) Bound {
	t.Helper()
	b, _, err := ParseBound(flag, v, BareFromFirst)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An inverted window is an error, whether the bounds compare before the
// recordings are read (one form) or only after (two forms).
func TestInvertedWindowIsAnError(t *testing.T) {
	pa, pb := twoHosts(t, true, false, 0, 10, 10)
	for _, w := range [][2]string{
		{"+10s", "+1s"},
		{t0.Add(5 * time.Second).Format(time.RFC3339Nano), t0.Add(time.Second).Format(time.RFC3339Nano)},
		{"-1m", "-2h"},
		{t0.Add(5 * time.Second).Format(time.RFC3339Nano), "+1s"}, // needs the first event
	} {
		_, err := Run(context.Background(), []string{pa, pb}, Options{Since: bound(t, "--since", w[0]), Until: bound(t, "--until", w[1])})
		if !errors.Is(err, ErrEmptyWindow) {
			t.Errorf("--since %s --until %s: %v", w[0], w[1], err)
		}
	}
	// a window of one instant, or an ordinary one, is no error
	for _, w := range [][2]string{{"+1s", "+1s"}, {"+1s", "+3s"}, {t0.Format(time.RFC3339Nano), "+3s"}} {
		if _, err := Run(context.Background(), []string{pa, pb}, Options{Since: bound(t, "--since", w[0]), Until: bound(t, "--until", w[1])}); err != nil {
			t.Errorf("--since %s --until %s: %v", w[0], w[1], err)
		}
	}
}

// A filter that matches nothing in the recordings says so: an unknown
// device or QPN by name, filters that each match but leave nothing
// together as one line; a filter that shows something says nothing.
func TestFilterMatchingNothingWarns(t *testing.T) {
	pa, pb := twoHosts(t, true, false, 0, 10, 10)
	for _, c := range []struct {
		o    Options
		want []string
	}{
		{Options{Devices: []string{"nosuch"}}, []string{"warning: --device nosuch: no QP of the recordings is on this device"}},
		{Options{QPNs: []uint32{100, 4242}}, []string{"warning: --qpn 4242: no QP of the recordings has this number"}},
		{Options{Since: bound(t, "--since", "+1h")}, []string{"warning: --since: nothing of the recordings matches: no finding and no QP shown"}},
		{Options{QPNs: []uint32{100}, Devices: []string{"mlx5_0"}, Until: bound(t, "--until", "+0s"), Since: bound(t, "--since", "+0s")}, nil},
		{Options{QPNs: []uint32{100}}, nil},
		{Options{}, nil},
	} {
		var got []string
		c.o.Warn = func(s string) { got = append(got, s) }
		run(t, c.o, pa, pb)
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%+v: warned %q, want %q", c.o, got, c.want)
		}
	}
}

// The report's JSON carries its version, and a report that shows nothing
// writes its lists as [], never null.
func TestReportJSONVersionedEmptyListsArrays(t *testing.T) {
	pa, pb := twoHosts(t, true, false, 0, 10, 10)
	r := run(t, Options{Devices: []string{"nosuch"}}, pa, pb)
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if string(doc["schema"]) != "1" {
		t.Errorf("schema: %s, want 1", doc["schema"])
	}
	for _, k := range []string{"findings", "qps", "pairs", "unpaired"} {
		if string(doc[k]) != "[]" {
			t.Errorf("%s: %s, want []", k, doc[k])
		}
	}
	if bytes.Contains(b.Bytes(), []byte("null")) {
		t.Errorf("a null in the report:\n%s", b.Bytes())
	}
}

// --fail-on: the report is written whole, then the findings at or above
// the severity are an error that counts them; below it, none.
func TestFailOn(t *testing.T) {
	pa, pb := twoHosts(t, true, false, 0, 10, 10) // missed-rearm, cm-not-notified, one-sided-rearm: errors
	for _, c := range []struct {
		at   apm.Severity
		want int
	}{{apm.SevInfo, 3}, {apm.SevError, 3}, {apm.SevCritical, 0}} {
		var out bytes.Buffer
		err := Main(context.Background(), []string{pa, pb}, Options{}, Output{Format: "json", Stdout: &out, FailOn: &c.at})
		var f *FailError
		switch {
		case c.want == 0 && err != nil:
			t.Errorf("--fail-on %s: %v", c.at, err)
		case c.want > 0 && (!errors.As(err, &f) || f.N != c.want || f.At != c.at):
			t.Errorf("--fail-on %s: %v, want %d findings", c.at, err, c.want)
		}
		if !json.Valid(out.Bytes()) {
			t.Errorf("--fail-on %s: the report is not written whole", c.at)
		}
	}
	// filters decide what counts: no finding of QP 4242
	at := apm.SevInfo
	if err := Main(context.Background(), []string{pa, pb}, Options{QPNs: []uint32{4242}}, Output{Stdout: &bytes.Buffer{}, FailOn: &at}); err != nil {
		t.Errorf("--fail-on info --qpn 4242: %v", err)
	}
}
