package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// A section of CHANGELOG.md: "## [1.2.3] - 2026-12-10" or "## [Unreleased]",
// then "- " items whose further lines are indented.
type section struct {
	name  string // 1.2.3, 1.3.0-rc1 (the tag without its v), or Unreleased
	date  time.Time
	items []string
}

// An entry of the packages' changelogs.
type entry struct {
	version string // the package version: 1.2.3, 1.3.0~rc1, 1.2.3+git5.abc1234
	date    time.Time
	items   []string
}

const unreleased = "Unreleased"

var (
	headingRE = regexp.MustCompile(`^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$`)
	releaseRE = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$`)
)

// parseChangelog reads CHANGELOG.md's sections, newest first; text before
// the first one is the file's introduction.
func parseChangelog(r io.Reader) ([]section, error) {
	var secs []section
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimRight(sc.Text(), " \t")
		if strings.HasPrefix(l, "## ") {
			m := headingRE.FindStringSubmatch(l)
			switch {
			case m == nil:
				return nil, fmt.Errorf("line %d: want \"## [X.Y.Z] - YYYY-MM-DD\" or \"## [%s]\"", n, unreleased)
			case seen[m[1]]:
				return nil, fmt.Errorf("line %d: a second section [%s]", n, m[1])
			case m[1] == unreleased && m[2] != "":
				return nil, fmt.Errorf("line %d: the %s section has no date", n, unreleased)
			case m[1] != unreleased && (!releaseRE.MatchString(m[1]) || m[2] == ""):
				return nil, fmt.Errorf("line %d: want \"## [X.Y.Z] - YYYY-MM-DD\" (X.Y.Z being the tag without its v)", n)
			}
			s := section{name: m[1]}
			if m[2] != "" {
				d, err := time.Parse(time.DateOnly, m[2])
				if err != nil {
					return nil, fmt.Errorf("line %d: %v", n, err)
				}
				s.date = d
			}
			seen[m[1]] = true
			secs = append(secs, s)
			continue
		}
		if len(secs) == 0 || l == "" {
			continue
		}
		s := &secs[len(secs)-1]
		switch {
		case strings.HasPrefix(l, "- "):
			s.items = append(s.items, strings.TrimSpace(l[2:]))
		case strings.HasPrefix(l, "  ") && len(s.items) > 0:
			s.items[len(s.items)-1] += " " + strings.TrimSpace(l)
		default:
			return nil, fmt.Errorf("line %d: want a \"- \" item or an indented line continuing one", n)
		}
	}
	return secs, sc.Err()
}

// entries are the packages' changelog entries for version, newest first.
// A release's version must have its section; a snapshot between releases
// (X.Y.Z+git<N>.<commit>) is the Unreleased section dated when (the
// commit's date), above every release.
func entries(secs []section, version string, when time.Time) ([]entry, error) {
	var es []entry
	base, _, snapshot := strings.Cut(version, "+")
	want := strings.Replace(base, "~", "-", 1)
	if snapshot {
		e := entry{version: version, date: when, items: []string{"Development snapshot."}}
		for _, s := range secs {
			if s.name == unreleased && len(s.items) > 0 {
				e.items = s.items
			}
		}
		es = append(es, e)
	}
	found := snapshot
	for _, s := range secs {
		found = found || s.name == want
		if s.name == unreleased || !found {
			continue
		}
		if len(s.items) == 0 {
			return nil, fmt.Errorf("section [%s] has no items", s.name)
		}
		es = append(es, entry{version: strings.Replace(s.name, "-", "~", 1), date: s.date, items: s.items})
	}
	if !found {
		return nil, fmt.Errorf("no section [%s] for version %s", want, version)
	}
	return es, nil
}

// writeDeb writes Debian's changelog format, items wrapped at 80 columns.
func writeDeb(w io.Writer, name, packager string, es []entry) error {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s (%s) unstable; urgency=medium\n\n", name, e.version)
		for _, it := range e.items {
			b.WriteString(wrap("  * ", "    ", it, 80))
		}
		fmt.Fprintf(&b, "\n -- %s  %s\n", packager, e.date.UTC().Format("Mon, 02 Jan 2006 15:04:05 -0700"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func wrap(first, rest, text string, width int) string {
	var b strings.Builder
	line := first
	for i, w := range strings.Fields(text) {
		if i > 0 && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = rest + w
			continue
		}
		if i > 0 {
			line += " "
		}
		line += w
	}
	return b.String() + line + "\n"
}

// rpmRelease is the .rpm's Release, nfpm's default.
const rpmRelease = "1"

// writeChglog writes the changelog nfpm reads (goreleaser/chglog's YAML).
// nfpm prints an entry's "semver" as it is, after the packager: it is the
// .rpm's version-release, as rpmlint wants the newest entry to end.
func writeChglog(w io.Writer, packager string, es []entry) error {
	type change struct {
		Note string `yaml:"note"`
	}
	type item struct {
		Semver   string    `yaml:"semver"`
		Date     time.Time `yaml:"date"`
		Packager string    `yaml:"packager"`
		Changes  []change  `yaml:"changes"`
	}
	var out []item
	for _, e := range es {
		it := item{Semver: e.version + "-" + rpmRelease, Date: e.date.UTC(), Packager: packager}
		for _, n := range e.items {
			it.Changes = append(it.Changes, change{n})
		}
		out = append(out, it)
	}
	return yaml.NewEncoder(w).Encode(out)
}

func changelogCmd(args []string) error {
	fs := flag.NewFlagSet("changelog", flag.ContinueOnError)
	version := fs.String("version", "", "the package version")
	date := fs.String("date", "", "a snapshot's date, RFC 3339 (the commit's)")
	packager := fs.String("packager", "", "name <email>")
	debOut := fs.String("deb", "", "write Debian's changelog here")
	rpmOut := fs.String("rpm", "", "write nfpm's changelog (the rpm's %changelog) here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *version == "" || *packager == "" || *debOut == "" || *rpmOut == "" {
		return fmt.Errorf("usage: gen changelog -version V -date RFC3339 -packager P -deb OUT -rpm OUT CHANGELOG.md")
	}
	var when time.Time
	if *date != "" {
		t, err := time.Parse(time.RFC3339, *date)
		if err != nil {
			return fmt.Errorf("-date: %v", err)
		}
		when = t
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	secs, err := parseChangelog(f)
	if err != nil {
		return fmt.Errorf("%s: %v", fs.Arg(0), err)
	}
	es, err := entries(secs, *version, when)
	if err != nil {
		return fmt.Errorf("%s: %v", fs.Arg(0), err)
	}
	if strings.Contains(*version, "+") && when.IsZero() {
		return fmt.Errorf("a snapshot's changelog entry needs -date")
	}
	for _, o := range []struct {
		path  string
		write func(io.Writer) error
	}{
		{*debOut, func(w io.Writer) error { return writeDeb(w, "apmwatch", *packager, es) }},
		{*rpmOut, func(w io.Writer) error { return writeChglog(w, *packager, es) }},
	} {
		var b strings.Builder
		if err := o.write(&b); err != nil {
			return err
		}
		if err := os.WriteFile(o.path, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
