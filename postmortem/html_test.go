package postmortem

import (
	"bytes"
	"encoding/xml"
	"regexp"
	"strings"
	"testing"
)

func renderHTML(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, goldenPair(t)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestHTMLSelfContained(t *testing.T) {
	page := renderHTML(t)
	for _, bad := range []string{"http:", "https:", "<link", " src=", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("the page refers to something outside itself: %q", bad)
		}
	}
	if !strings.HasPrefix(page, "<!DOCTYPE html>") || !strings.Contains(page, "</html>") {
		t.Fatal("not a whole HTML document")
	}
}

func TestHTMLStructure(t *testing.T) {
	page := renderHTML(t)
	svgs := regexp.MustCompile(`(?s)<svg .*?</svg>`).FindAllString(page, -1)
	if len(svgs) != 1 {
		t.Fatalf("%d SVG timelines, want 1 (the pair)", len(svgs))
	}
	var doc struct {
		Lanes   []struct{} `xml:"text"`
		Circles []struct {
			Class string `xml:"class,attr"`
			Tip   string `xml:"data-tip,attr"`
		} `xml:"circle"`
		Paths []struct {
			Class string `xml:"class,attr"`
			Tip   string `xml:"data-tip,attr"`
		} `xml:"path"`
		Rects []struct {
			Tip string `xml:"data-tip,attr"`
		} `xml:"rect"`
	}
	if err := xml.Unmarshal([]byte(svgs[0]), &doc); err != nil {
		t.Fatalf("the SVG is not well-formed: %v", err)
	}
	// a: create, 3 modifies, alt, rearm; b: create, 3 modifies
	if len(doc.Circles) != 10 {
		t.Errorf("%d circles (modifies, creates), want 10", len(doc.Circles))
	}
	var events, findings int
	for _, p := range doc.Paths {
		switch p.Class {
		case "qpevent":
			events++
		case "finding":
			findings++
		}
		if p.Tip == "" {
			t.Error("a mark without hover details")
		}
	}
	if events != 2 || findings != 3 {
		t.Errorf("%d QP event marks and %d finding marks, want 2 and 3", events, findings)
	}
	// a: notify, LAP send, APR recv; b: LAP handler, APR send (the LAP
	// arrived before the handler tied its comm id to the QP)
	if len(doc.Rects) != 5 {
		t.Errorf("%d CM marks, want 5", len(doc.Rects))
	}
	if !strings.Contains(page, "one-sided-rearm=1") || strings.Count(page, `<td class="sev-error">`) != 3 {
		t.Error("summary or findings table incomplete")
	}
	if !strings.Contains(page, "episode 1 at") || !strings.Contains(page, "LAP host-a mlx5_0/100 -&gt; host-b mlx5_0/200") {
		t.Error("episode and LAP lines missing")
	}
	if !strings.Contains(page, `addEventListener("mousemove"`) {
		t.Error("no hover script")
	}
}

// Text from a recording (comm names, details) is escaped.
func TestHTMLEscapes(t *testing.T) {
	r := goldenPair(t)
	r.QPs[0].Entries[0].Detail = `<script>alert(1)</script>`
	r.Findings[0].Explanation = `"><img>`
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<script>alert") || strings.Contains(b.String(), `"><img>`) {
		t.Fatal("recording text reached the page unescaped")
	}
}
