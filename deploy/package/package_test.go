// Package package_test checks the packages make package builds
// (APMWATCH_PKG_DIR, set by make package-test): the .deb installs with dpkg
// into a scratch root (this machine is shared: the host's own dpkg database
// is left alone), systemd-analyze verify accepts the installed unit with the
// package's drop-in, man renders apmwatch-trace from the installed pages,
// the installed bash completion completes subcommands, and the .rpm holds
// the same files.
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
	"/usr/lib/systemd/system/apmwatch-audit.service.d/package.conf",
	"/usr/lib/systemd/system/apmwatch-fleet.service",
	"/usr/lib/systemd/system/apmwatch-fleet.service.d/package.conf",
	"/etc/default/apmwatch",
	"/usr/share/man/man1/apmwatch.1.gz",
	"/usr/share/man/man1/apmwatch-trace.1.gz",
	"/usr/share/man/man1/apmwatch-audit.1.gz",
	"/usr/share/man/man1/apmwatch-qp-list.1.gz",
	"/usr/share/bash-completion/completions/apmwatch",
	"/usr/share/zsh/vendor-completions/_apmwatch",
	"/usr/share/fish/vendor_completions.d/apmwatch.fish",
	"/usr/share/doc/apmwatch/audit.md",
	"/usr/share/doc/apmwatch/examples/apmwatch-rules.yaml",
	"/usr/share/doc/apmwatch/examples/apmwatch-dashboard.json",
}

func TestPackages(t *testing.T) {
	dir := os.Getenv("APMWATCH_PKG_DIR")
	if dir == "" {
		t.Skip("packages: run make package-test")
	}
	deb, rpm := one(t, dir, "*.deb"), one(t, dir, "*.rpm")

	// The .rpm's file list.
	rpmFiles := strings.Fields(run(t, nil, "rpm", "-qpl", rpm))
	for _, f := range wantFiles {
		if !slices.Contains(rpmFiles, f) {
			t.Errorf("%s: no %s", filepath.Base(rpm), f)
		}
	}
	if cf := run(t, nil, "rpm", "-qpc", rpm); !strings.Contains(cf, "/etc/default/apmwatch") {
		t.Errorf("%s: /etc/default/apmwatch is not a config file: %q", filepath.Base(rpm), cf)
	}
	// The defaults file may hold flags with credentials: root:root 0640.
	modes := run(t, nil, "rpm", "-qp", "--queryformat", "[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILENAMES}\n]", rpm)
	if !strings.Contains(modes, "-rw-r----- root:root /etc/default/apmwatch\n") {
		t.Errorf("%s: /etc/default/apmwatch is not root:root 0640:\n%s", filepath.Base(rpm), modes)
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
	run(t, nil, "dpkg", "--root="+root, "--log=/dev/null", "-i", deb)
	if st := run(t, nil, "dpkg", "--root="+root, "-s", "apmwatch"); !strings.Contains(st, "Status: install ok installed") ||
		!strings.Contains(st, "/etc/default/apmwatch") {
		t.Fatalf("dpkg -s apmwatch:\n%s", st)
	}
	for _, f := range wantFiles {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("installed: %v", err)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/default/apmwatch")); err != nil {
		t.Errorf("installed /etc/default/apmwatch: %v", err)
	} else if fi.Mode().Perm() != 0o640 {
		t.Errorf("installed /etc/default/apmwatch: mode %v, want 0640", fi.Mode().Perm())
	}
	if v := run(t, nil, filepath.Join(root, "usr/bin/apmwatch"), "version"); !strings.HasPrefix(v, "apmwatch ") {
		t.Errorf("installed apmwatch version: %q", v)
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
	units := []string{"apmwatch-audit.service", "apmwatch-fleet.service"}
	for _, u := range units {
		run(t, nil, "systemd-analyze", "verify", "--root="+root, u)
	}
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
}
