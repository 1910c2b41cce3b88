package main

import (
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestNfpmConfigs(t *testing.T) {
	stage := writeFiles(t, t.TempDir(), map[string]string{"man1/a.1.gz": "a", "man1/b.1.gz": "b", "NOTICES": "n"})
	docs := writeFiles(t, t.TempDir(), map[string]string{"x.md": "x", "y.md": "y", "z.txt": "z"})
	src := `name: apmwatch
version: ${APMWATCH_PKG_VERSION}
contents:
  - src: bin/apmwatch
    dst: /usr/bin/apmwatch
  - expand: true
    src: ${APMWATCH_PKG_STAGE}/man1/
    dst: /usr/share/man/man1/
    type: doc
    file_info: {mode: 0644}
  - src: ` + docs + `/*.md
    dst: /usr/share/doc/apmwatch/
    type: doc
  - expand: true
    src: ${APMWATCH_PKG_STAGE}/NOTICES
    dst: /usr/share/doc/apmwatch/NOTICES
    type: doc
  - src: LICENSE
    dst: /usr/share/licenses/apmwatch/LICENSE
    packager: rpm
    type: license
`
	deb, rpm, err := nfpmConfigs([]byte(src), map[string]string{"APMWATCH_PKG_STAGE": stage}, "/stage/changelog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type content struct {
		Src, Dst, Type, Packager string
		Expand                   bool
		FileInfo                 map[string]any `yaml:"file_info"`
	}
	var d, r struct {
		Name, Version, Changelog string
		Contents                 []content
	}
	if err := yaml.Unmarshal(deb, &d); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(rpm, &r); err != nil {
		t.Fatal(err)
	}
	// The .deb: the same entries, doc types gone (nfpm would drop them),
	// globs and ${} left to nfpm, no changelog.
	if d.Name != "apmwatch" || d.Version != "${APMWATCH_PKG_VERSION}" || d.Changelog != "" || len(d.Contents) != 5 ||
		d.Contents[1].Src != "${APMWATCH_PKG_STAGE}/man1/" || !d.Contents[1].Expand || d.Contents[4].Type != "license" {
		t.Errorf("deb config:\n%s", deb)
	}
	for _, c := range d.Contents {
		if c.Type == "doc" {
			t.Errorf("deb config keeps a doc entry: %+v", c)
		}
	}
	// The .rpm: one doc entry per file, the changelog named.
	var got []string
	for _, c := range r.Contents {
		got = append(got, c.Type+" "+c.Dst)
		if c.Type == "doc" && (c.Packager != "rpm" || !filepath.IsAbs(c.Src)) {
			t.Errorf("rpm doc entry: %+v", c)
		}
	}
	want := []string{" /usr/bin/apmwatch", "doc /usr/share/man/man1/a.1.gz", "doc /usr/share/man/man1/b.1.gz",
		"doc /usr/share/doc/apmwatch/x.md", "doc /usr/share/doc/apmwatch/y.md", "doc /usr/share/doc/apmwatch/NOTICES",
		"license /usr/share/licenses/apmwatch/LICENSE"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || r.Changelog != "/stage/changelog.yaml" ||
		r.Contents[1].FileInfo["mode"] != 0o644 {
		t.Errorf("rpm contents %q, want %q; changelog %q; file_info %v", got, want, r.Changelog, r.Contents[1].FileInfo)
	}
	// A doc entry matching nothing is an error, not a package without it.
	if _, _, err := nfpmConfigs([]byte(strings.Replace(src, "/*.md", "/*.rst", 1)), map[string]string{"APMWATCH_PKG_STAGE": stage}, "c"); err == nil {
		t.Error("a doc glob matching nothing was accepted")
	}
}
