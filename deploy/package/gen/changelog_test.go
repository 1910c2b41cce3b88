package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const sample = `# Changelog

Introduction, ignored.

## [Unreleased]

- Opt-in drop-ins ship in the packages; the enforce one is enabled by a
  symlink.

## [1.3.0-rc1] - 2026-12-20

- A candidate.

## [1.2.3] - 2026-12-10

- First release, with a long line that has to be wrapped because Debian's changelog wants eighty columns at most.
- Second item.
`

func parse(t *testing.T, s string) []section {
	t.Helper()
	secs, err := parseChangelog(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return secs
}

func TestChangelogEntries(t *testing.T) {
	secs := parse(t, sample)
	if len(secs) != 3 || secs[0].items[0] != "Opt-in drop-ins ship in the packages; the enforce one is enabled by a symlink." {
		t.Fatalf("sections: %+v", secs)
	}
	when := time.Date(2026, 12, 21, 8, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		version string
		want    []string // each entry's version and first item
	}{
		{"1.2.3", []string{"1.2.3 First release"}},
		{"1.3.0~rc1", []string{"1.3.0~rc1 A candidate.", "1.2.3 First release"}},
		{"1.3.0~rc1+git2.abc1234", []string{"1.3.0~rc1+git2.abc1234 Opt-in", "1.3.0~rc1 A candidate.", "1.2.3 First release"}},
		{"0.0.0+git7.abc1234", []string{"0.0.0+git7.abc1234 Opt-in", "1.3.0~rc1 A candidate.", "1.2.3 First release"}},
	} {
		es, err := entries(secs, c.version, when)
		if err != nil {
			t.Fatalf("%s: %v", c.version, err)
		}
		var got []string
		for _, e := range es {
			got = append(got, e.version+" "+e.items[0])
		}
		if len(got) != len(c.want) {
			t.Fatalf("%s: %q, want %q", c.version, got, c.want)
		}
		for i := range got {
			if !strings.HasPrefix(got[i], c.want[i]) {
				t.Errorf("%s: entry %d %q, want %q", c.version, i, got[i], c.want[i])
			}
		}
	}
	// A release with no section of its own is refused.
	if _, err := entries(secs, "1.2.4", when); err == nil || !strings.Contains(err.Error(), "no section [1.2.4]") {
		t.Errorf("1.2.4: %v, want no section", err)
	}
	// A snapshot with an empty Unreleased section says what it is.
	es, err := entries(parse(t, "## [Unreleased]\n\n## [1.2.3] - 2026-12-10\n- x\n"), "1.2.3+git1.abc", when)
	if err != nil || es[0].items[0] != "Development snapshot." || !es[0].date.Equal(when) {
		t.Errorf("empty Unreleased: %+v %v", es, err)
	}
}

func TestChangelogRefuses(t *testing.T) {
	for _, bad := range []string{
		"## [1.2.3]\n- no date\n",
		"## [v1.2.3] - 2026-12-10\n- the tag's v\n",
		"## [Unreleased] - 2026-12-10\n- dated\n",
		"## [1.2.3] - 2026-12-10\n- x\n## [1.2.3] - 2026-12-11\n- twice\n",
		"## [1.2.3] - 2026-12-10\nprose, lost in the packages\n",
		"## [1.2.3] - 2026-13-10\n- no such month\n",
		"## 1.2.3\n- no brackets\n",
	} {
		if _, err := parseChangelog(strings.NewReader(bad)); err == nil || !strings.HasPrefix(err.Error(), "line ") {
			t.Errorf("%q: %v, want a refusal naming the line", bad, err)
		}
	}
}

func TestChangelogFormats(t *testing.T) {
	dir := t.TempDir()
	md, deb, rpm := filepath.Join(dir, "CHANGELOG.md"), filepath.Join(dir, "changelog"), filepath.Join(dir, "changelog.yaml")
	if err := os.WriteFile(md, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	const packager = "apmwatch <apmwatch@users.noreply.github.com>"
	err := changelogCmd([]string{"-version", "1.3.0~rc1+git2.abc1234", "-date", "2026-12-21T09:00:00+01:00",
		"-packager", packager, "-deb", deb, "-rpm", rpm, md})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(deb)
	d := string(b)
	for _, want := range []string{
		"apmwatch (1.3.0~rc1+git2.abc1234) unstable; urgency=medium\n\n  * Opt-in drop-ins",
		"\n -- " + packager + "  Mon, 21 Dec 2026 08:00:00 +0000\n\napmwatch (1.3.0~rc1) unstable",
		"  * First release, with a long line that has to be wrapped because Debian's\n    changelog wants",
		" -- " + packager + "  Thu, 10 Dec 2026 00:00:00 +0000\n",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("debian changelog lacks %q:\n%s", want, d)
		}
	}
	for _, l := range strings.Split(d, "\n") {
		if strings.HasPrefix(l, "  ") && len(l) > 80 {
			t.Errorf("debian changelog item line longer than 80: %q", l)
		}
	}
	b, _ = os.ReadFile(rpm)
	var got []struct {
		Semver, Packager string
		Date             time.Time
		Changes          []struct{ Note string }
	}
	if err := yaml.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Semver != "1.3.0~rc1+git2.abc1234-1" || got[1].Semver != "1.3.0~rc1-1" || got[2].Semver != "1.2.3-1" ||
		got[0].Packager != packager || len(got[2].Changes) != 2 || got[2].Changes[1].Note != "Second item." {
		t.Errorf("chglog:\n%s", b)
	}
	// A snapshot needs its date.
	if err := changelogCmd([]string{"-version", "1.2.3+git1.abc", "-packager", packager, "-deb", deb, "-rpm", rpm, md}); err == nil {
		t.Error("a snapshot without -date was accepted")
	}
}
