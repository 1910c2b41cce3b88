package package_test

import (
	"compress/gzip"
	"debug/buildinfo"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const rpmLicense = "Apache-2.0 AND (GPL-2.0-only OR BSD-2-Clause)"

func bpf(files string) bool { return strings.HasPrefix(files, "bpf/* ") }

// checkCopyright: the .deb's copyright file is machine-readable (DEP-5):
// every licence a Files paragraph names has a paragraph of its own with
// its text or where Debian keeps it.
func checkCopyright(t *testing.T, root string) {
	b, err := os.ReadFile(filepath.Join(root, "usr/share/doc/apmwatch/copyright"))
	if err != nil {
		t.Error(err)
		return
	}
	paras := strings.Split(strings.TrimSpace(string(b)), "\n\n")
	if !strings.HasPrefix(paras[0], "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") {
		t.Errorf("copyright: not DEP-5:\n%s", paras[0])
	}
	used, texts := map[string][]string{}, map[string]bool{}
	field := regexp.MustCompile(`(?m)^(Files|License): *(.*)$`)
	for _, p := range paras[1:] {
		f := map[string]string{}
		for _, m := range field.FindAllStringSubmatch(p, -1) {
			f[m[1]] = m[2]
		}
		switch {
		case f["Files"] != "" && f["License"] != "":
			for _, l := range strings.Split(f["License"], " or ") {
				used[l] = append(used[l], f["Files"])
			}
		case f["Files"] == "" && f["License"] != "" && strings.Count(p, "\n") > 0:
			texts[f["License"]] = true
		default:
			t.Errorf("copyright: neither a Files paragraph nor a licence's:\n%s", p)
		}
	}
	if !slices.Contains(used["Apache-2.0"], "*") || !slices.ContainsFunc(used["GPL-2"], bpf) || !slices.ContainsFunc(used["BSD-2-clause"], bpf) {
		t.Errorf("copyright: files by licence %q, want * Apache-2.0 and bpf/* GPL-2 or BSD-2-clause", used)
	}
	for l := range used {
		if !texts[l] {
			t.Errorf("copyright: no License paragraph for %s", l)
		}
	}
}

// checkNotices: NOTICES names every module compiled into the installed
// binary, with its licence's text under it.
func checkNotices(t *testing.T, root string) {
	info, err := buildinfo.ReadFile(filepath.Join(root, "usr/bin/apmwatch"))
	if err != nil {
		t.Error(err)
		return
	}
	b, err := os.ReadFile(filepath.Join(root, "usr/share/doc/apmwatch/NOTICES"))
	if err != nil {
		t.Error(err)
		return
	}
	s := string(b)
	if len(info.Deps) < 10 || !strings.Contains(s, " "+info.GoVersion+": LICENSE\n") {
		t.Errorf("NOTICES: %d modules in the binary; the Go toolchain's licence (%s) missing?", len(info.Deps), info.GoVersion)
	}
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		i := strings.Index(s, "\n"+d.Path+" "+d.Version+": ")
		if i < 0 {
			t.Errorf("NOTICES: no licence of %s %s", d.Path, d.Version)
			continue
		}
		if next := s[i+1:]; !regexp.MustCompile(`(?i)licen[cs]e|copyright|permission`).MatchString(next[:min(len(next), 2000)]) {
			t.Errorf("NOTICES: %s %s is followed by no licence text", d.Path, d.Version)
		}
	}
}

// checkChangelogs: both packages' changelogs start with the version built.
func checkChangelogs(t *testing.T, root, rpm, version string) {
	f, err := os.Open(filepath.Join(root, "usr/share/doc/apmwatch/changelog.gz"))
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Error(err)
		return
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Error(err)
		return
	}
	if want := "apmwatch (" + version + ") unstable; urgency=medium\n\n  * "; !strings.HasPrefix(string(b), want) {
		t.Errorf("changelog.gz starts %q, want %q", b[:min(len(b), 80)], want)
	}
	first, _, _ := strings.Cut(run(t, nil, "rpm", "-qp", "--changelog", rpm), "\n")
	if !strings.HasPrefix(first, "* ") || !strings.HasSuffix(first, " - "+version+"-1") {
		t.Errorf("rpm %%changelog starts %q, want the entry of %s-1", first, version)
	}
}

// checkRPMMeta: the .rpm's version, License and %license file.
func checkRPMMeta(t *testing.T, rpm, version string) {
	if got := run(t, nil, "rpm", "-qp", "--queryformat", "%{VERSION}\n%{LICENSE}\n", rpm); got != version+"\n"+rpmLicense+"\n" {
		t.Errorf("rpm version and License: %q, want %q and %q", got, version, rpmLicense)
	}
	if got := strings.TrimSpace(run(t, nil, "rpm", "-qpL", rpm)); got != "/usr/share/licenses/apmwatch/LICENSE" {
		t.Errorf("rpm %%license files: %q", got)
	}
	docs := run(t, nil, "rpm", "-qpd", rpm)
	for _, d := range []string{"/usr/share/doc/apmwatch/NOTICES", "/usr/share/doc/apmwatch/audit.md", "/usr/share/man/man1/apmwatch-audit.1.gz"} {
		if !strings.Contains(docs, d+"\n") {
			t.Errorf("rpm: %s is not %%doc", d)
		}
	}
}
