package postmortem

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHTMLInChromium loads the page of a pair (the lab's pair in
// examples/, or APMWATCH_HTML_PAIR) in headless Chromium (Debian's
// chromium; `make html-test` installs it), drives it through the DevTools
// protocol like a person would (wheel, clicks) and asserts in the page:
// every event and finding of the data is drawn, the wheel zooms, a click on
// a finding highlights exactly its evidence and a second click clears it.
// Screenshots of the default view, the zoomed view and a selected finding
// go to APMWATCH_SCREENSHOT_DIR (default: the test's temporary directory).
// Run with APMWATCH_BROWSER=1.
func TestHTMLInChromium(t *testing.T) {
	if os.Getenv("APMWATCH_BROWSER") != "1" {
		t.Skip("set APMWATCH_BROWSER=1 (needs chromium)")
	}
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not installed: apt-get install -y chromium")
	}
	dir := t.TempDir()
	shots := os.Getenv("APMWATCH_SCREENSHOT_DIR")
	if shots == "" {
		shots = dir
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	r := run(t, Options{}, pagePair(t)...)
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	data := pageJSON(t, b.String())
	origin := pageOrigin(r)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a guard against a hung browser, not a measurement
	defer cancel()
	c := startChromium(t, ctx, bin, dir)
	c.call(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": false}, nil)
	c.call(t, "Page.navigate", map[string]any{"url": "file://" + page}, nil)
	for !c.eval(t, `document.readyState === "complete" && document.body.classList.contains("js")`).(bool) {
		time.Sleep(50 * time.Millisecond)
	}

	// (a) the default view: every event and finding drawn inside its plot
	missing := c.eval(t, `(function () {
		var data = JSON.parse(document.getElementById("apm-data").textContent), bad = [];
		data.timelines.forEach(function (tl) {
			var plot = document.getElementById(tl.id).querySelector("svg.plot > rect.plot-bg").getBoundingClientRect();
			var ids = tl.findings.slice();
			tl.lanes.forEach(function (l) { l.t.forEach(function (t, k) { ids.push("ev-" + l.qp + "-" + k); }); });
			ids.forEach(function (id) {
				var el = document.getElementById(id), r = el && el.getBoundingClientRect();
				if (!r || r.width === 0 || r.left + r.width / 2 < plot.left || r.left + r.width / 2 > plot.right) bad.push(id);
			});
		});
		data.findings.forEach(function (f) { if (!document.getElementById("row-" + f.id)) bad.push("row-" + f.id); });
		return bad.join(" ");
	})()`)
	if missing != "" {
		t.Errorf("not drawn: %v", missing)
	}
	notBlank(t, c.screenshot(t, filepath.Join(shots, "a-default.png"), true))

	// hovering a mark shows its time in full and what it was
	evs := data.Timelines[0].events()
	ev := evs[len(evs)-1]
	c.eval(t, `document.getElementById("`+ev.ID+`").scrollIntoView({block: "center"})`)
	m := c.rect(t, `document.getElementById("`+ev.ID+`")`)
	c.call(t, "Input.dispatchMouseEvent", map[string]any{"type": "mouseMoved", "x": m.X + m.W/2, "y": m.Y + m.H/2}, nil)
	var qi, k int
	fmt.Sscanf(ev.ID, "ev-%d-%d", &qi, &k)
	e := r.QPs[qi].Entries[k]
	wantTip := fullStamp(e.Time) + " (" + offset(origin, e.Time) + ")"
	if tip := c.eval(t, `document.getElementById("tip").style.display === "block" ? document.getElementById("tip").textContent : ""`).(string); !strings.Contains(tip, wantTip) || !strings.Contains(tip, e.What) {
		t.Errorf("hovering %s shows %q, want its time %q and %q", ev.ID, tip, wantTip, e.What)
	}
	c.call(t, "Input.dispatchMouseEvent", map[string]any{"type": "mouseMoved", "x": 1, "y": 1}, nil)

	// (b) the wheel zooms in around the cursor
	tl := data.Timelines[0].ID
	c.eval(t, `document.getElementById("`+tl+`").scrollIntoView({block: "center"})`)
	plot := c.rect(t, `document.querySelector("#`+tl+` svg.plot > rect.plot-bg")`)
	before := c.eval(t, `document.querySelector('[data-timeline="`+tl+`"] .window').textContent`)
	for range 5 {
		c.call(t, "Input.dispatchMouseEvent", map[string]any{"type": "mouseWheel", "x": plot.X + plot.W/2, "y": plot.Y + plot.H/2, "deltaX": 0, "deltaY": -120}, nil)
	}
	after := c.eval(t, `document.querySelector('[data-timeline="`+tl+`"] .window').textContent`)
	out := c.eval(t, `Array.prototype.filter.call(document.querySelectorAll("#`+tl+` .mark"), function (el) {
		var p = document.querySelector("#`+tl+` svg.plot > rect.plot-bg").getBoundingClientRect(), r = el.getBoundingClientRect();
		return r.right < p.left || r.left > p.right;
	}).length`).(float64)
	t.Logf("wheel: %q -> %q; %v marks now outside the view", before, after, out)
	if before == after || out == 0 {
		t.Errorf("the wheel did not zoom: %q -> %q, %v marks outside the view", before, after, out)
	}
	c.screenshot(t, filepath.Join(shots, "b-wheel-zoom.png"), false)
	c.eval(t, `document.querySelector('[data-timeline="`+tl+`"] [data-act="reset"]').click()`)

	// (d) the linear scale is linear in time; a drag zooms to its span
	c.click(t, c.rect(t, `document.querySelector('[data-timeline="`+tl+`"] [data-act="mode"]')`))
	xs := func() map[string]float64 {
		v := c.eval(t, `(function () { var out = {}; document.querySelectorAll("#`+tl+` .mark").forEach(function (el) {
			var r = el.getBoundingClientRect(); out[el.id] = r.left + r.width / 2; }); return out; })()`).(map[string]any)
		out := map[string]float64{}
		for k, x := range v {
			out[k] = x.(float64)
		}
		return out
	}
	first := slices.MinFunc(evs, func(a, b eventData) int { return cmp.Compare(a.T, b.T) })
	last := slices.MaxFunc(evs, func(a, b eventData) int { return cmp.Compare(a.T, b.T) })
	x := xs()
	perNS := (x[last.ID] - x[first.ID]) / float64(last.T-first.T)
	if perNS <= 0 {
		t.Fatalf("linear scale: the last event is not right of the first: %v", x)
	}
	for _, e := range evs {
		if want := x[first.ID] + perNS*float64(e.T-first.T); math.Abs(x[e.ID]-want) > 1.5 {
			t.Errorf("linear scale: %s at x=%.1f, want %.1f", e.ID, x[e.ID], want)
		}
	}
	plot = c.rect(t, `document.querySelector("#`+tl+` svg.plot > rect.plot-bg")`)
	from, to := plot.X+plot.W*0.1, plot.X+plot.W*0.3
	c.drag(t, from, to, plot.Y+10)
	tAt := func(px float64) float64 { return float64(first.T) + (px-x[first.ID])/perNS }
	margin := 3 / perNS
	x2 := xs()
	for _, e := range evs {
		in := x2[e.ID] >= plot.X && x2[e.ID] <= plot.X+plot.W
		if t0 := float64(e.T); t0 > tAt(from)+margin && t0 < tAt(to)-margin && !in || (t0 < tAt(from)-margin || t0 > tAt(to)+margin) && in {
			t.Errorf("after a drag over [%.0f, %.0f] ns: %s at %d ns is shown=%v", tAt(from), tAt(to), e.ID, e.T, in)
		}
	}
	t.Logf("linear, dragged: %q", c.eval(t, `document.querySelector('[data-timeline="`+tl+`"] .window').textContent`))
	c.screenshot(t, filepath.Join(shots, "d-linear-drag.png"), false)
	c.click(t, c.rect(t, `document.querySelector('[data-timeline="`+tl+`"] [data-act="mode"]')`))

	// (c) a click on each finding highlights exactly its evidence; a
	// second click clears it
	shot := slices.IndexFunc(data.Findings, func(f findingData) bool { return len(f.Points) > 0 })
	if shot < 0 {
		shot = len(data.Findings) - 1
	}
	for i, f := range data.Findings {
		row := `document.getElementById("row-` + f.ID + `")`
		c.eval(t, row+`.scrollIntoView({block: "center"})`)
		c.click(t, c.rect(t, row))
		got := c.eval(t, `Array.prototype.map.call(document.querySelectorAll(".mark.evidence"), function (e) { return e.id; }).sort().join(" ")`)
		want := slices.Clone(f.Evidence)
		slices.Sort(want)
		if got != strings.Join(want, " ") {
			t.Errorf("finding %d (%s): highlighted %q, want %q", i, r.Findings[i].Kind, got, strings.Join(want, " "))
		}
		// independently of the page's matching: each highlighted event is
		// at the time of a piece of the finding's evidence
		times := map[int64]bool{}
		for _, e := range r.Findings[i].Evidence {
			times[evidenceTime(&r.Findings[i], e).Sub(origin).Nanoseconds()] = true
		}
		for _, tld := range data.Timelines {
			for _, e := range tld.events() {
				if slices.Contains(f.Evidence, e.ID) && !times[e.T] {
					t.Errorf("finding %d (%s): %s is highlighted but is at no evidence time", i, r.Findings[i].Kind, e.ID)
				}
			}
		}
		if n := c.eval(t, `document.querySelectorAll(".point.evidence").length`).(float64); int(n) != len(f.Points) {
			t.Errorf("finding %d: %v evidence points drawn, want %d", i, n, len(f.Points))
		}
		if sel := c.eval(t, row+`.classList.contains("selected")`).(bool); !sel {
			t.Errorf("finding %d: its row is not selected", i)
		}
		if f.Timeline != "" {
			vis := c.eval(t, `(function () { var r = document.getElementById("`+f.Timeline+`").getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; })()`).(bool)
			if !vis {
				t.Errorf("finding %d: its timeline was not scrolled into view", i)
			}
		}
		if i == shot {
			c.screenshot(t, filepath.Join(shots, "c-finding-evidence.png"), false)
		}
		c.eval(t, row+`.scrollIntoView({block: "center"})`)
		c.click(t, c.rect(t, row))
		if left := c.eval(t, `document.querySelectorAll(".evidence, .selected, .point").length`).(float64); left != 0 {
			t.Errorf("finding %d: a second click left %v highlighted elements", i, left)
		}
	}
	// Enter on a focused row selects and deselects its finding
	if len(data.Findings) > 0 {
		id := data.Findings[0].ID
		c.eval(t, `document.getElementById("row-`+id+`").focus()`)
		for _, want := range []bool{true, false} {
			c.key(t, "Enter")
			if sel := c.eval(t, `document.getElementById("row-`+id+`").classList.contains("selected")`).(bool); sel != want {
				t.Errorf("Enter on the row of %s: selected=%v, want %v", id, sel, want)
			}
		}
	}
	// the diamond on the timeline selects too
	if len(data.Timelines[0].Findings) > 0 {
		id := data.Timelines[0].Findings[0]
		c.eval(t, `document.getElementById("`+tl+`").scrollIntoView({block: "center"})`)
		c.click(t, c.rect(t, `document.getElementById("`+id+`")`))
		if sel := c.eval(t, `document.getElementById("row-`+id+`").classList.contains("selected")`).(bool); !sel {
			t.Errorf("a click on the diamond of %s did not select it", id)
		}
	}
	t.Logf("screenshots in %s", shots)
}

func notBlank(t *testing.T, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	colors := map[uint32]int{}
	bounds := img.Bounds()
	nonWhite := 0
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			colors[(r>>8)<<16|(g>>8)<<8|b>>8]++
			if r>>8 < 240 || g>>8 < 240 || b>>8 < 240 {
				nonWhite++
			}
		}
	}
	total := bounds.Dx() * bounds.Dy() / 4
	t.Logf("screenshot %dx%d: %d colours, %.1f%% not white", bounds.Dx(), bounds.Dy(), len(colors), 100*float64(nonWhite)/float64(total))
	if len(colors) < 20 || nonWhite < total/50 {
		t.Fatalf("the screenshot looks blank: %d colours, %d of %d sampled pixels not white", len(colors), nonWhite, total)
	}
}

// TestHTMLLoadTime measures how long headless Chromium takes to load pages
// (APMWATCH_HTML_PAGES="a.html b.html", each loaded APMWATCH_HTML_ROUNDS
// times, 3 by default, alternating): from the navigation to the end of the
// load event, as the page's own Navigation Timing says. It asserts nothing
// about the times (docs/postmortem.md has the numbers and the command).
func TestHTMLLoadTime(t *testing.T) {
	pages := strings.Fields(os.Getenv("APMWATCH_HTML_PAGES"))
	if len(pages) == 0 || os.Getenv("APMWATCH_BROWSER") != "1" {
		t.Skip(`set APMWATCH_BROWSER=1 APMWATCH_HTML_PAGES="a.html ..."`)
	}
	rounds := 3
	fmt.Sscan(os.Getenv("APMWATCH_HTML_ROUNDS"), &rounds)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	for round := range rounds {
		for _, p := range pages {
			abs, err := filepath.Abs(p)
			if err != nil {
				t.Fatal(err)
			}
			c := startChromium(t, ctx, "chromium", t.TempDir())
			c.call(t, "Page.navigate", map[string]any{"url": "file://" + abs}, nil)
			for c.eval(t, `document.readyState === "complete" && performance.getEntriesByType("navigation")[0].loadEventEnd > 0`) != true {
				time.Sleep(100 * time.Millisecond)
			}
			ms := c.eval(t, `performance.getEntriesByType("navigation")[0].loadEventEnd`).(float64)
			fi, _ := os.Stat(abs)
			c.stop()
			t.Logf("round %d: %s (%d MB): loaded in %.0f ms", round+1, p, fi.Size()>>20, ms)
		}
	}
}
