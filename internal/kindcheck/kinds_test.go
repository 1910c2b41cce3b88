package kindcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/fleet/publish"
	"github.com/apmwatch/apmwatch/output"
	"github.com/apmwatch/apmwatch/postmortem"
	"github.com/apmwatch/apmwatch/recording"
)

// every runs check on the sample of each kind of event.Kinds, as a subtest
// named after the kind; a kind without a sample fails.
func every(t *testing.T, check func(t *testing.T, k event.Kind, s sample)) {
	all := samples()
	for _, k := range event.Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			s, ok := all[k]
			if !ok {
				t.Fatalf("no sample of kind %s in samples_test.go: add one, and its cases wherever kinds are told apart (docs/develop.md, \"A new event kind\")", k)
			}
			check(t, k, s)
		})
	}
}

// The samples are of the kinds event lists, one payload each, and every
// payload of event.Event belongs to some kind.
func TestSamplesCoverEveryKind(t *testing.T) {
	all := samples()
	if len(all) != len(event.Kinds()) {
		t.Errorf("%d samples for %d kinds: a sample of a kind event.Kinds does not list", len(all), len(event.Kinds()))
	}
	payloads := map[string]bool{}
	every(t, func(t *testing.T, k event.Kind, s sample) {
		if s.ev.Kind != k {
			t.Fatalf("the sample of %s has kind %s", k, s.ev.Kind)
		}
		if got, err := event.ParseKind(k.String()); err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), got, err)
		}
		set := setPayloads(s.ev)
		if len(set) != 1 {
			t.Errorf("payloads %v: want exactly one", set)
		}
		for _, p := range set {
			payloads[p] = true
		}
	})
	for _, p := range setPayloads(nil) {
		if !payloads[p] {
			t.Errorf("payload %s of event.Event is carried by no kind's sample", p)
		}
	}
}

// setPayloads names the payload pointers set on e; for nil, every payload
// field of event.Event.
func setPayloads(e *event.Event) []string {
	var out []string
	typ := reflect.TypeFor[event.Event]()
	for i := range typ.NumField() {
		if typ.Field(i).Type.Kind() != reflect.Pointer {
			continue
		}
		if e == nil || !reflect.ValueOf(e).Elem().Field(i).IsNil() {
			out = append(out, typ.Field(i).Name)
		}
	}
	return out
}

// The JSON line names the kind and carries its payload's fields, each one
// documented in docs/events.md, where the kind has its own section.
func TestJSONOutput(t *testing.T) {
	doc := readEventsDoc(t)
	every(t, func(t *testing.T, k event.Kind, s sample) {
		line := render(t, "json", s.ev)
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if m["kind"] != k.String() {
			t.Errorf("kind %v, want %q", m["kind"], k.String())
		}
		for _, f := range s.json {
			if _, ok := m[f]; !ok {
				t.Errorf("no %q field: %s", f, line)
			}
		}
		for _, f := range s.notJSON {
			if _, ok := m[f]; ok {
				t.Errorf("a %q field: %s", f, line)
			}
		}
		for f := range m {
			if !doc.fields[f] {
				t.Errorf("field %q is not in a table of docs/events.md", f)
			}
		}
		if !doc.sections[k.String()] {
			t.Errorf("docs/events.md has no section headed `%s`", k)
		}
		if !doc.kindRow[k.String()] {
			t.Errorf("docs/events.md's common field `kind` does not list `%s`", k)
		}
	})
}

// The table row names the kind and says what its payload holds.
func TestTableOutput(t *testing.T) {
	every(t, func(t *testing.T, k event.Kind, s sample) {
		if row := output.Row(s.ev); row[1] != k.String() {
			t.Errorf("KIND column %q, want %q", row[1], k.String())
		}
		if d := output.Detail(s.ev); !strings.Contains(d, s.detail) {
			t.Errorf("WHAT %q, want it to hold %q", d, s.detail)
		}
		if out := render(t, "table", s.ev); !bytes.Contains(out, []byte(k.String())) {
			t.Errorf("the table does not name the kind:\n%s", out)
		}
	})
}

func render(t *testing.T, format string, e *event.Event) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := output.NewWriter(format, &b)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(e); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A recording gives back every field of every kind.
func TestRecordingRoundTrip(t *testing.T) {
	every(t, func(t *testing.T, k event.Kind, s sample) {
		var b bytes.Buffer
		w, err := recording.NewWriter(&b, event.Meta{Host: "h", BootOffset: off}, recording.Options{FlushInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(s.ev); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := recording.NewReader(&b, "kinds.rec", recording.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := *s.ev
		if !got.Time.Equal(want.Time) {
			t.Errorf("time %v, want %v", got.Time, want.Time)
		}
		got.Time, want.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("read back\n%s\nwant\n%s", dump(got), dump(&want))
		}
		if _, err := r.Next(context.Background()); !errors.Is(err, io.EOF) {
			t.Errorf("after the one event: %v, want io.EOF", err)
		}
	})
}

func dump(e *event.Event) string {
	b, _ := json.Marshal(e)
	return string(b)
}

// created is the create of the sample QP, a second before the samples.
func created() *event.Event {
	e := ev(event.KindQPCreate, qpn)
	e.Seq, e.Boot, e.Time = 1, boot0-uint64(time.Second), e.Time.Add(-time.Second)
	e.Life = &event.QPLife{QPType: event.QPTypeRC, Origin: event.OriginUser}
	return e
}

// The model takes every kind: none falls through to what it ignores.
func TestModelTakesEveryKind(t *testing.T) {
	every(t, func(t *testing.T, k event.Kind, s sample) {
		m, err := apm.New(apm.DefaultConfig(), func(apm.Finding) {})
		if err != nil {
			t.Fatal(err)
		}
		m.Handle(created())
		m.Handle(s.ev)
		m.Finish(boot0 + uint64(time.Hour))
		if st := m.Stats(); st.Ignored != 0 {
			t.Errorf("the model ignored it: %+v", st)
		}
	})
}

// postmortem puts an event about a QP on that QP's timeline, and the HTML
// report has a mark style for every kind.
func TestPostmortemTimeline(t *testing.T) {
	css, err := os.ReadFile("../../postmortem/report.html.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	every(t, func(t *testing.T, k event.Kind, s sample) {
		if !regexp.MustCompile(`\.mark\.` + regexp.QuoteMeta(k.String()) + `[\s,{]`).Match(css) {
			t.Errorf("postmortem/report.html.tmpl has no .mark.%s style", k)
		}
		if s.ev.QPN == 0 {
			return // about no QP: on no timeline
		}
		path := filepath.Join(dir, k.String()+".rec")
		w, err := recording.Create(path, event.Meta{Host: "h", BootOffset: off}, recording.Options{FlushInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range []*event.Event{created(), s.ev} {
			if err := w.Write(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := postmortem.Run(context.Background(), []string{path}, postmortem.Options{All: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range r.QPs {
			for _, en := range q.Entries {
				if q.Device == dev && q.QPN == qpn && en.Kind == k.String() && en.Time.Equal(s.ev.Time) && en.What != "" {
					return
				}
			}
		}
		t.Errorf("no %s entry on the timeline of %s/%d: %+v", k, dev, qpn, r.QPs)
	})
}

// A connected end's fleet record is published again when an event changes
// what it says, and only then.
func TestFleetRecord(t *testing.T) {
	every(t, func(t *testing.T, k event.Kind, s sample) {
		tr := publish.NewTracker("h", t.TempDir())
		connect := ev(event.KindModify, qpn)
		connect.Modify = &event.Modify{QPType: event.QPTypeRC, Origin: event.OriginUser, Hook: "ib_modify_qp_with_udata",
			AttrMask: event.AttrState | event.AttrAV | event.AttrDestQPN, State: event.StateRTR, DestQPN: 18,
			Primary: &event.Path{Port: 1, DLID: 2}}
		connect.Boot, connect.Time = boot0-uint64(time.Second/2), connect.Time.Add(-time.Second/2)
		tr.Observe(created())
		tr.Observe(connect)
		now := s.ev.Time
		if cs := tr.Flush(now); len(cs) != 1 {
			t.Fatalf("the connected end: %d records, want 1", len(cs))
		}
		tr.Observe(s.ev)
		cs := tr.Flush(now.Add(time.Second))
		if changed := len(cs) > 0; changed != s.connChange && !s.connEither {
			t.Errorf("record published again: %v, want %v (%+v)", changed, s.connChange, cs)
		}
	})
}
