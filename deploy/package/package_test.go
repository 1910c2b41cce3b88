// Package package_test checks the packages make package builds
// (APMWATCH_PKG_DIR and APMWATCH_PKG_VERSION, set by make package-test): the
// .deb installs with dpkg into a scratch root (this machine is shared: the
// host's own dpkg database is left alone); systemd-analyze verify accepts the
// installed units with the package's drop-ins and with each opt-in drop-in
// enabled, whose effective command line and privileges are checked; man
// renders apmwatch-trace from the installed pages; the installed bash
// completion completes subcommands; the licences, NOTICES and changelogs are
// there; lintian and rpmlint find no error; the .rpm holds the same files.
// dpkg --root and the copies into the root need root (CI runs as root).
package package_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

func one(t *testing.T, dir, pattern string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(m) != 1 {
		t.Fatalf("%s in %s: %v, want one", pattern, dir, m)
	}
	return m[0]
}

// Every file the packages must hold.
var wantFiles = []string{
	"/usr/bin/apmwatch",
	"/usr/lib/systemd/system/apmwatch-audit.service",
	"/usr/lib/systemd/system/apmwatch-audit.service.d/10-package.conf",
	"/usr/lib/systemd/system/apmwatch-fleet.service",
	"/usr/lib/systemd/system/apmwatch-fleet.service.d/10-package.conf",
	"/usr/share/apmwatch/systemd/apmwatch-audit.service.d/enforce.conf",
	"/usr/share/apmwatch/systemd/apmwatch-audit.service.d/publish.conf",
	"/usr/share/apmwatch/systemd/apmwatch-audit.service.d/metrics.conf",
	"/usr/share/apmwatch/finding.schema.json",
	"/etc/default/apmwatch",
	"/etc/default/apmwatch-fleet",
	"/usr/share/man/man1/apmwatch.1.gz",
	"/usr/share/man/man1/apmwatch-trace.1.gz",
	"/usr/share/man/man1/apmwatch-audit.1.gz",
	"/usr/share/man/man1/apmwatch-qp-list.1.gz",
	"/usr/share/bash-completion/completions/apmwatch",
	"/usr/share/fish/vendor_completions.d/apmwatch.fish",
	"/etc/apmwatch/policy.json.example",
	"/etc/apmwatch/README",
	"/etc/logrotate.d/apmwatch",
	"/usr/share/doc/apmwatch/audit.md",
	"/usr/share/doc/apmwatch/examples/apmwatch-rules.yaml",
	"/usr/share/doc/apmwatch/examples/apmwatch-dashboard.json",
	"/usr/share/doc/apmwatch/NOTICES",
}

// Each packager's own: zsh completions where each distribution's zsh
// looks.
var (
	debFiles = []string{"/usr/share/zsh/vendor-completions/_apmwatch"}
	rpmFiles = []string{"/usr/share/zsh/site-functions/_apmwatch"}
)

// The defaults files: config files kept across upgrades, root:root 0640
// (they may hold the daemons' flags with credentials).
var configFiles = []string{"/etc/default/apmwatch", "/etc/default/apmwatch-fleet"}

// The other config files, kept across upgrades too, readable.
var publicConfigFiles = []string{"/etc/apmwatch/policy.json.example", "/etc/apmwatch/README", "/etc/logrotate.d/apmwatch"}

func TestPackages(t *testing.T) {
	dir, version := os.Getenv("APMWATCH_PKG_DIR"), os.Getenv("APMWATCH_PKG_VERSION")
	if dir == "" || version == "" {
		t.Skip("packages: run make package-test")
	}
	deb, rpm := one(t, dir, "*.deb"), one(t, dir, "*.rpm")
	if filepath.Base(deb) != "apmwatch_"+version+"_amd64.deb" || filepath.Base(rpm) != "apmwatch-"+version+"-1.x86_64.rpm" {
		t.Errorf("packages %s %s, want version %s", filepath.Base(deb), filepath.Base(rpm), version)
	}
	// SHA256SUMS lists both, and they match.
	if sums := run(t, nil, "sh", "-c", "cd '"+dir+"' && sha256sum -c SHA256SUMS"); sums != filepath.Base(deb)+": OK\n"+filepath.Base(rpm)+": OK\n" {
		t.Errorf("sha256sum -c SHA256SUMS: %q", sums)
	}
	checkRPMMeta(t, rpm, version)

	// The .rpm's file list.
	inRPM := strings.Fields(run(t, nil, "rpm", "-qpl", rpm))
	for _, f := range append(slices.Clone(wantFiles), rpmFiles...) {
		if !slices.Contains(inRPM, f) {
			t.Errorf("%s: no %s", filepath.Base(rpm), f)
		}
	}
	for _, f := range debFiles {
		if slices.Contains(inRPM, f) {
			t.Errorf("%s: holds the .deb's %s", filepath.Base(rpm), f)
		}
	}
	// The maintainer scripts, as %post, %preun and %postun.
	scripts := run(t, nil, "rpm", "-qp", "--scripts", rpm)
	for _, want := range []string{"postinstall scriptlet", "preuninstall scriptlet", "postuninstall scriptlet", "try-restart", "systemctl stop"} {
		if !strings.Contains(scripts, want) {
			t.Errorf("%s: no %q in its scripts:\n%s", filepath.Base(rpm), want, scripts)
		}
	}
	cf := strings.Fields(run(t, nil, "rpm", "-qpc", rpm))
	for _, f := range publicConfigFiles {
		if !slices.Contains(cf, f) {
			t.Errorf("%s: %s is not a config file: %q", filepath.Base(rpm), f, cf)
		}
	}
	modes := run(t, nil, "rpm", "-qp", "--queryformat", "[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILENAMES}\n]", rpm)
	for _, f := range configFiles {
		if !slices.Contains(cf, f) {
			t.Errorf("%s: %s is not a config file: %q", filepath.Base(rpm), f, cf)
		}
		if !strings.Contains(modes, "-rw-r----- root:root "+f+"\n") {
			t.Errorf("%s: %s is not root:root 0640:\n%s", filepath.Base(rpm), f, modes)
		}
	}

	// dpkg installs the .deb into a scratch root.
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "usr/bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The maintainer scripts run outside the root (it has no shell), told
	// where it is by DPKG_ROOT; without a systemd running there they do
	// nothing.
	run(t, nil, "dpkg", "--root="+root, "--log=/dev/null", "--force-script-chrootless", "-i", deb)
	st := run(t, nil, "dpkg", "--root="+root, "-s", "apmwatch")
	if !strings.Contains(st, "Status: install ok installed") || !strings.Contains(st, "\nVersion: "+version+"\n") {
		t.Fatalf("dpkg -s apmwatch, want version %s:\n%s", version, st)
	}
	for _, f := range append(slices.Clone(wantFiles), debFiles...) {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("installed: %v", err)
		}
	}
	for _, f := range append(slices.Clone(configFiles), publicConfigFiles...) {
		if !strings.Contains(st, "\n "+f+" ") {
			t.Errorf("dpkg: %s is not a conffile:\n%s", f, st)
		}
	}
	for _, f := range []string{"postinst", "prerm", "postrm"} {
		if _, err := os.Stat(filepath.Join(root, "var/lib/dpkg/info/apmwatch."+f)); err != nil {
			t.Errorf("the .deb's %s: %v", f, err)
		}
	}
	// The packaged units run the packaged binary, drop-in or not.
	for _, u := range []string{"apmwatch-audit.service", "apmwatch-fleet.service"} {
		b, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system", u))
		if err != nil || !strings.Contains(string(b), "\nExecStart=/usr/bin/apmwatch ") || strings.Contains(string(b), "\nExecStart=/usr/local/") {
			t.Errorf("installed %s does not run /usr/bin/apmwatch: %v", u, err)
		}
	}
	// The example policy checks, in monitor mode.
	if out := run(t, nil, filepath.Join(root, "usr/bin/apmwatch"), "actuate", "policy-check", filepath.Join(root, "etc/apmwatch/policy.json.example")); !strings.Contains(out, "ok: mode monitor") {
		t.Errorf("policy-check of the example policy: %q", out)
	}
	for _, f := range configFiles {
		if !strings.Contains(st, "\n "+f+" ") {
			t.Errorf("dpkg: %s is not a conffile:\n%s", f, st)
		}
		if fi, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("installed %s: %v", f, err)
		} else if fi.Mode().Perm() != 0o640 {
			t.Errorf("installed %s: mode %v, want 0640", f, fi.Mode().Perm())
		}
	}
	checkCopyright(t, root)
	checkNotices(t, root)
	checkChangelogs(t, root, rpm, version)
	// One version: the binary says the package's.
	if v := run(t, nil, filepath.Join(root, "usr/bin/apmwatch"), "version"); !strings.HasPrefix(v, "apmwatch "+version+" (commit ") {
		t.Errorf("installed apmwatch version: %q, want the package's %s", v, version)
	}

	// systemd-analyze verify in the root: the host's own units (targets the
	// unit orders after) and /bin/kill (ExecReload) are copied in; the unit's
	// ExecStart is the drop-in's /usr/bin/apmwatch, so without the binary
	// verify must fail.
	run(t, nil, "cp", "-rn", "/usr/lib/systemd/system/.", filepath.Join(root, "usr/lib/systemd/system/"))
	run(t, nil, "cp", "/usr/bin/kill", filepath.Join(root, "usr/bin/kill"))
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	checkUnits(t, root)
	units := []string{"apmwatch-audit.service", "apmwatch-fleet.service"}
	bin := filepath.Join(root, "usr/bin/apmwatch")
	if err := os.Rename(bin, bin+".away"); err != nil {
		t.Fatal(err)
	}
	for _, u := range units {
		out, err := exec.Command("systemd-analyze", "verify", "--root="+root, u).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "/usr/bin/apmwatch") {
			t.Errorf("systemd-analyze verify %s without /usr/bin/apmwatch: %v %s, want a failure naming it", u, err, out)
		}
	}
	if err := os.Rename(bin+".away", bin); err != nil {
		t.Fatal(err)
	}

	// man finds and renders the installed page by name.
	page := run(t, []string{"MANPATH=" + filepath.Join(root, "usr/share/man"), "MANWIDTH=80"}, "man", "-P", "cat", "apmwatch-trace")
	for _, want := range []string{"APMWATCH-TRACE(1)", "apmwatch trace [flags]", "--output", "--rearm-deadline"} {
		if !strings.Contains(page, want) {
			t.Errorf("man apmwatch-trace: no %q in\n%s", want, page)
		}
	}

	// The installed bash completion, with bash-completion, completes
	// subcommands by asking the installed binary.
	script := `source /usr/share/bash-completion/bash_completion
source "$ROOT/usr/share/bash-completion/completions/apmwatch"
complete1() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=(); __start_apmwatch; echo "${COMPREPLY[*]}"; }
complete1 apmwatch q
complete1 apmwatch qp ""
complete1 apmwatch trace --outp`
	got := strings.Split(strings.TrimSpace(run(t, []string{"ROOT=" + root, "PATH=" + filepath.Join(root, "usr/bin") + ":" + os.Getenv("PATH")},
		"bash", "-c", script)), "\n")
	want := []string{"qp", "list show", "--output"}
	if len(got) != len(want) {
		t.Fatalf("bash completion: %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(strings.TrimSpace(got[i]), want[i]) {
			t.Errorf("bash completion %d: %q, want %q", i, got[i], want[i])
		}
	}

	checkLint(t, deb, rpm)
}
