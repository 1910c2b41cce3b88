package package_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// script runs one of this directory's scripts in dir.
func script(t *testing.T, dir, name string, args ...string) (string, string, error) {
	t.Helper()
	self, err := filepath.Abs(name)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Dir = dir
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return strings.TrimSpace(out.String()), strings.TrimSpace(errb.String()), err
}

func TestVersionFromDescribe(t *testing.T) {
	for describe, want := range map[string]string{
		"v1.2.3-0-gabc1234":         "1.2.3",
		"v1.2.3-5-gabc1234":         "1.2.3+git5.abc1234",
		"v10.20.30-123-g0123456789": "10.20.30+git123.0123456789",
		"v1.3.0-rc1-0-gdeadbee":     "1.3.0~rc1",
		"v1.3.0-rc.2-4-gdeadbee":    "1.3.0~rc.2+git4.deadbee",
	} {
		if got, msg, err := script(t, ".", "version.sh", describe); err != nil || got != want {
			t.Errorf("%s: %q %v %s, want %q", describe, got, err, msg, want)
		}
	}
	for _, bad := range []string{"", "1.2.3-0-gabc", "v1.2-0-gabc", "v1.2.3", "v1.2.3-x_y-0-gabc", "v1.2.3-0-gxyz"} {
		if got, msg, err := script(t, ".", "version.sh", bad); err == nil || got != "" || !strings.HasPrefix(msg, "version: ") {
			t.Errorf("%q: %q %v %q, want one line of refusal", bad, got, err, msg)
		}
	}
}

// A repository of its own: git with no user configuration.
func gitRepo(t *testing.T) (string, func(args ...string) string) {
	dir := t.TempDir()
	g := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	g("init", "-q", "-b", "main")
	return dir, g
}

func commit(t *testing.T, dir string, g func(...string) string, file, text string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	g("add", file)
	g("commit", "-q", "-m", file)
	return g("rev-parse", "--short", "HEAD")
}

// The version of a checkout, from its tags: none, on one, after one, on a
// pre-release.
func TestVersionFromGit(t *testing.T) {
	dir, g := gitRepo(t)
	version := func() string {
		t.Helper()
		v, msg, err := script(t, dir, "version.sh")
		if err != nil {
			t.Fatalf("version.sh: %v %s", err, msg)
		}
		return v
	}
	commit(t, dir, g, "a", "1")
	c := commit(t, dir, g, "a", "2")
	if v := version(); v != "0.0.0+git2."+c {
		t.Errorf("no tag: %q, want 0.0.0+git2.%s", v, c)
	}
	g("tag", "-a", "-m", "1.2.3", "v1.2.3")
	g("tag", "other-tag")
	if v := version(); v != "1.2.3" {
		t.Errorf("on v1.2.3: %q", v)
	}
	commit(t, dir, g, "a", "3")
	c = commit(t, dir, g, "a", "4")
	if v := version(); v != "1.2.3+git2."+c {
		t.Errorf("two commits after v1.2.3: %q, want 1.2.3+git2.%s", v, c)
	}
	g("tag", "v1.3.0-rc1") // a lightweight tag counts too
	if v := version(); v != "1.3.0~rc1" {
		t.Errorf("on v1.3.0-rc1: %q", v)
	}
	if !regexp.MustCompile(`^[0-9a-f]{7,}$`).MatchString(c) {
		t.Errorf("commit %q", c)
	}
}

// make release's checks refuse a dirty tree, a commit off a tag and a
// release without its changelog section, and print the version otherwise.
func TestReleaseCheck(t *testing.T) {
	dir, g := gitRepo(t)
	check := func(want string) {
		t.Helper()
		v, msg, err := script(t, dir, "release-check.sh")
		if want == "" && (err == nil || v != "" || !strings.HasPrefix(msg, "release: ")) {
			t.Errorf("release-check: %q %v %q, want a refusal", v, err, msg)
		}
		if want != "" && (err != nil || v != want) {
			t.Errorf("release-check: %q %v %q, want %q", v, err, msg, want)
		}
	}
	log := "# Changelog\n\n## [Unreleased]\n\n## [1.2.3] - 2026-12-10\n\n- First.\n"
	commit(t, dir, g, "CHANGELOG.md", log)
	check("") // no tag
	g("tag", "v1.2.3")
	check("1.2.3")
	if err := os.WriteFile(filepath.Join(dir, "stray"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	check("") // an untracked file
	os.Remove(filepath.Join(dir, "stray"))
	commit(t, dir, g, "CHANGELOG.md", log+"\n")
	check("") // a commit after the tag
	g("tag", "v1.2.4")
	check("") // no section for 1.2.4
	commit(t, dir, g, "CHANGELOG.md", strings.Replace(log, "## [Unreleased]\n", "## [Unreleased]\n\n## [1.2.4] - 2026-12-11\n\n- Second.\n", 1))
	g("tag", "v1.2.5")
	check("") // 1.2.4's section does not do for 1.2.5
	g("tag", "-d", "v1.2.5")
	g("tag", "-f", "v1.2.4")
	check("1.2.4")
}

// The versions of successive checkouts increase for dpkg and for rpm: a
// release, commits after it, a pre-release of the next, commits after that,
// the next release.
func TestVersionsOrder(t *testing.T) {
	var vs []string
	for _, d := range []string{"v1.2.3-0-gabc1234", "v1.2.3-5-gabc1234", "v1.2.3-12-g0bc1234", "v1.3.0-rc1-0-gdeadbee",
		"v1.3.0-rc1-2-gbeef000", "v1.3.0-rc2-0-gdeadbee", "v1.3.0-0-gdeadbee", "v1.10.0-0-gdeadbee"} {
		v, msg, err := script(t, ".", "version.sh", d)
		if err != nil {
			t.Fatalf("%s: %v %s", d, err, msg)
		}
		vs = append(vs, v)
	}
	for _, tool := range []string{"dpkg", "rpm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s missing: make setup installs it", tool)
		}
	}
	for i := 1; i < len(vs); i++ {
		a, b := vs[i-1], vs[i]
		if err := exec.Command("dpkg", "--compare-versions", a, "lt", b).Run(); err != nil {
			t.Errorf("dpkg: %s is not before %s", a, b)
		}
		out, err := exec.Command("rpm", "--eval", "%{lua: print(rpm.vercmp('"+a+"', '"+b+"'))}").Output()
		if err != nil || strings.TrimSpace(string(out)) != "-1" {
			t.Errorf("rpm: %s is not before %s: %q %v", a, b, out, err)
		}
	}
}

// One version everywhere: make's VERSION is version.sh's, the binary make
// build links carries it and make package names the packages after it;
// VERSION=... or the old PKG_VERSION=... overrides all of them alike.
func TestOneVersion(t *testing.T) {
	want, msg, err := script(t, ".", "version.sh")
	if err != nil {
		t.Fatalf("version.sh: %v %s", err, msg)
	}
	mk := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("make", append([]string{"-s", "--no-print-directory", "-C", "../.."}, args...)...).Output()
		if err != nil {
			t.Fatalf("make %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{{nil, want}, {[]string{"VERSION=1.2.3"}, "1.2.3"}, {[]string{"PKG_VERSION=1.2.4"}, "1.2.4"}} {
		if got := strings.TrimSpace(mk(append([]string{"version"}, c.args...)...)); got != c.want {
			t.Errorf("make version %v: %q, want %q", c.args, got, c.want)
		}
		if build := mk(append([]string{"-n", "build"}, c.args...)...); !strings.Contains(build, "internal/version.Version="+c.want+" ") {
			t.Errorf("make build %v does not link version %s:\n%s", c.args, c.want, build)
		}
		if pkg := mk(append([]string{"-n", "package"}, c.args...)...); !strings.Contains(pkg, "internal/version.Version="+c.want+" ") ||
			!strings.Contains(pkg, "APMWATCH_PKG_VERSION='"+c.want+"'") {
			t.Errorf("make package %v: the binary's and the packages' versions are not %s:\n%s", c.args, c.want, pkg)
		}
	}
}
