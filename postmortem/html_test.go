package postmortem

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func renderHTML(t *testing.T, r *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// pagePair is the pair the page tests render: APMWATCH_HTML_PAIR="a.rec
// b.rec" names any two recordings (an InfiniBand pair, say); by default
// two hosts whose recordings prove their port addresses (the examples'
// pairs do not: they hold no CM MAD).
func pagePair(t *testing.T) []string {
	if env := os.Getenv("APMWATCH_HTML_PAIR"); env != "" {
		f := strings.Fields(env)
		if len(f) != 2 {
			t.Fatalf("APMWATCH_HTML_PAIR=%q: want two recordings", env)
		}
		return f
	}
	pa, pb := twoHosts(t, true, false, 0, 10, 10)
	return []string{pa, pb}
}

// pageJSON is the page's data block, decoded.
func pageJSON(t *testing.T, page string) pageData {
	t.Helper()
	m := regexp.MustCompile(`(?s)<script type="application/json" id="apm-data">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no data block")
	}
	var d pageData
	if err := json.Unmarshal([]byte(m[1]), &d); err != nil {
		t.Fatalf("the data block is not JSON: %v", err)
	}
	return d
}

func TestHTMLSelfContained(t *testing.T) {
	page := renderHTML(t, goldenPair(t))
	for _, bad := range []string{"http:", "https:", "<link", " src=", "@import", "url(", "fetch(", "XMLHttpRequest", "innerHTML", "eval("} {
		if strings.Contains(page, bad) {
			t.Errorf("the page refers to something outside itself or builds markup from text: %q", bad)
		}
	}
	if !strings.HasPrefix(page, "<!DOCTYPE html>") || !strings.Contains(page, "</html>") {
		t.Fatal("not a whole HTML document")
	}
}

// checkPage asserts what every page shows of a report: each event of each
// timeline QP and each finding, in the markup and in the data, with the
// same ids; the legend; a band per migration.
func checkPage(t *testing.T, r *Report, page string) pageData {
	t.Helper()
	d := pageJSON(t, page)
	inData := map[string]bool{}
	for _, tl := range d.Timelines {
		for _, e := range tl.events() {
			inData[e.ID] = true
		}
	}
	events := 0
	for qi, q := range r.QPs {
		for k := range q.Entries {
			id := eventID(qi, k)
			events++
			if !inData[id] {
				t.Errorf("%s %s (%s) is not in the data", q.ID, q.Entries[k].What, id)
			}
			if !strings.Contains(page, ` id="`+id+`" class="mark `+q.Entries[k].Kind) {
				t.Errorf("%s %s (%s) has no mark", q.ID, q.Entries[k].What, id)
			}
		}
	}
	if len(inData) != events {
		t.Errorf("%d events in the data, %d in the report", len(inData), events)
	}
	if len(d.Findings) != len(r.Findings) {
		t.Fatalf("%d findings in the data, %d in the report", len(d.Findings), len(r.Findings))
	}
	for i, f := range r.Findings {
		id := findingID(i)
		if d.Findings[i].ID != id || !strings.Contains(page, `id="row-`+id+`"`) {
			t.Errorf("finding %d (%s) has no row", i, f.Kind)
		}
		if d.Findings[i].Timeline != "" && !strings.Contains(page, `<path id="`+id+`" class="finding sev-`+f.Severity.String()+`"`) {
			t.Errorf("finding %d (%s) has no mark", i, f.Kind)
		}
		if got := len(d.Findings[i].Evidence) + len(d.Findings[i].Points); d.Findings[i].Timeline != "" && got != len(f.Evidence) {
			t.Errorf("finding %d (%s): %d pieces of evidence shown, %d in the report", i, f.Kind, got, len(f.Evidence))
		}
	}
	for _, want := range []string{`id="legend"`, "mark modify", "mark modify-entry", "mark qp-event", "mark cm-notify", "mark qp-create", "mark qp-truth",
		"finding sev-critical", "finding sev-error", "finding sev-warning", "finding sev-info", "band rearmed", "band open", "side a", "side b"} {
		if legend := page[strings.Index(page, `id="legend"`):]; !strings.Contains(legend[:strings.Index(legend, "</div>")], want) {
			t.Errorf("the legend has no %q", want)
		}
	}
	bands := 0
	for _, tl := range d.Timelines {
		bands += len(tl.Bands)
		for _, b := range tl.Bands {
			if !strings.Contains(page, `<g id="`+b.ID+`" class="band `) {
				t.Errorf("band %s has no markup", b.ID)
			}
		}
	}
	if migrations := r.Summary.Migrations; bands < migrations {
		t.Errorf("%d episode bands for %d migrations", bands, migrations)
	}
	return d
}

// The lab's pair (or any two recordings given): every event and finding
// shows (checkPage: with a band per migration), a pair's timeline first.
func TestHTMLPair(t *testing.T) {
	r := run(t, Options{}, pagePair(t)...)
	if len(r.Pairs) == 0 {
		t.Fatal("the recordings hold no pair")
	}
	page := renderHTML(t, r)
	d := checkPage(t, r, page)
	if len(d.Timelines) < len(r.Pairs) || len(d.Timelines[0].Lanes) != 2 {
		t.Fatalf("want a timeline of two lanes per pair first: %+v", d.Timelines)
	}
}

func TestHTMLStructure(t *testing.T) {
	r := goldenPair(t)
	page := renderHTML(t, r)
	d := checkPage(t, r, page)
	svgs := regexp.MustCompile(`(?s)<svg id="tl-\d+" class="timeline".*?</svg>\s*</svg>`).FindAllString(page, -1)
	if len(svgs) != 1 {
		t.Fatalf("%d SVG timelines, want 1 (the pair)", len(svgs))
	}
	if err := xml.Unmarshal([]byte(svgs[0]), new(struct{})); err != nil {
		t.Fatalf("the SVG is not well-formed: %v", err)
	}
	// a rearmed 3 ms after migrating; b migrated and never rearmed
	tl := d.Timelines[0]
	if len(tl.Bands) != 2 {
		t.Fatalf("%d bands, want 2: %+v", len(tl.Bands), tl.Bands)
	}
	a, b := tl.Bands[0], tl.Bands[1]
	if a.Lane != 0 || time.Duration(a.T[1]-a.T[0]) != 3005*time.Microsecond || !strings.Contains(page, `<g id="`+a.ID+`" class="band rearmed"`) {
		t.Errorf("a's band: %+v", a)
	}
	if b.Lane != 1 || !strings.Contains(page, `<g id="`+b.ID+`" class="band open"`) || b.T[1] != slices.Max(eventTimes(tl)) {
		t.Errorf("b's band runs to the end of the timeline, open: %+v", b)
	}
	// evidence: the missed rearm is b's PATH_MIG; the one-sided rearm is
	// b's PATH_MIG (the episode starts), a's rearm, and its deadline (no event)
	what := func(id string) string {
		var qi, k int
		fmt.Sscanf(id, "ev-%d-%d", &qi, &k)
		return r.QPs[qi].ID + " " + r.QPs[qi].Entries[k].What
	}
	for i, f := range r.Findings {
		var got []string
		for _, id := range d.Findings[i].Evidence {
			got = append(got, what(id))
		}
		var want []string
		var points int
		switch f.Kind {
		case "missed-rearm", "cm-not-notified":
			want = []string{"host-b/mlx5_0/200#1 PATH_MIG"}
		case "one-sided-rearm":
			want, points = []string{"host-b/mlx5_0/200#1 PATH_MIG", "host-a/mlx5_0/100#1 modify REARM"}, 1
		default:
			t.Fatalf("unexpected finding %s", f.Kind)
		}
		if !slices.Equal(got, want) || len(d.Findings[i].Points) != points {
			t.Errorf("%s: evidence %q and %d points, want %q and %d", f.Kind, got, len(d.Findings[i].Points), want, points)
		}
	}
	// b's three findings at one time are drawn side by side
	var stacks []int
	for _, f := range d.Findings {
		stacks = append(stacks, f.Stack)
	}
	if !slices.Equal(stacks, []int{0, 1, 2}) {
		t.Errorf("findings at one time stacked %v, want [0 1 2]", stacks)
	}
	if !strings.Contains(page, "one-sided-rearm=1") || strings.Count(page, `<td class="sev-error">`) != 3 {
		t.Error("summary or findings table incomplete")
	}
	if !strings.Contains(page, "episode 1 at 2026-01-01 00:00:02.000004000 UTC") || !strings.Contains(page, "LAP host-a mlx5_0/100 -&gt; host-b mlx5_0/200") {
		t.Error("episode and LAP lines missing")
	}
	// times in full: date, nanoseconds, offset from the first mark
	if !strings.Contains(page, "2026-01-01 00:00:02.000304000 UTC<br>&#43;1.000304s") {
		t.Error("a finding's time is not given in full")
	}
}

func eventTimes(tl timelineData) []int64 {
	var out []int64
	for _, e := range tl.events() {
		out = append(out, e.T)
	}
	return out
}

// Text from a recording (comm names, details, evidence) is escaped, in the
// markup and in the data block.
func TestHTMLEscapes(t *testing.T) {
	r := goldenPair(t)
	evil := `</script><script>alert(1)</script><img src=x onerror=alert(2)>`
	r.QPs[0].Entries[0].Detail = evil
	r.QPs[1].Side = evil
	r.Findings[0].Explanation = `"><img>`
	r.Findings[2].Evidence[2].What = evil // drawn by the script: in the data block
	page := renderHTML(t, r)
	if strings.Contains(page, "<script>alert") || strings.Contains(page, `"><img>`) || strings.Contains(page, "<img src=x") {
		t.Fatal("recording text reached the page unescaped")
	}
	d := pageJSON(t, page)
	if p := d.Findings[2].Points; len(p) != 1 || p[0].What != evil {
		t.Fatalf("the data block does not carry the text intact: %+v", p)
	}
	if !strings.Contains(page, html.EscapeString(`<script>alert(1)`)) {
		t.Error("the detail is missing from the markup")
	}
}
