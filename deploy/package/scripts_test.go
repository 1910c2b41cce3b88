package package_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maint runs a maintainer script with args as dpkg or rpm would, with
// DPKG_ROOT at root and a systemctl on PATH that logs its arguments; it
// returns the systemctl calls, one a line.
func maint(t *testing.T, root, script string, args ...string) string {
	t.Helper()
	bin := t.TempDir()
	log := filepath.Join(bin, "calls")
	fake := "#!/bin/sh\necho \"$*\" >> " + log + "\n"
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := filepath.Abs(filepath.Join("scripts", script))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", append([]string{self}, args...)...)
	cmd.Env = append(os.Environ(), "DPKG_ROOT="+root, "PATH="+bin+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", script, args, err, out)
	}
	b, _ := os.ReadFile(log)
	return strings.TrimSpace(string(b))
}

// A root where systemd runs (or not).
func scriptRoot(t *testing.T, systemd bool) string {
	root := t.TempDir()
	if systemd {
		if err := os.MkdirAll(filepath.Join(root, "run/systemd/system"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The maintainer scripts under each of dpkg's and rpm's calls: systemd
// re-reads the units, an upgrade restarts what runs, a removal stops the
// daemons; an upgrade never stops them and a first install starts nothing.
func TestMaintainerScripts(t *testing.T) {
	const (
		reload  = "daemon-reload"
		restart = "try-restart apmwatch-audit.service apmwatch-fleet.service"
		stop    = "stop apmwatch-audit.service apmwatch-fleet.service"
	)
	for _, c := range []struct {
		script string
		args   []string
		want   []string
	}{
		{"postinstall.sh", []string{"configure", ""}, []string{reload}},                        // deb install
		{"postinstall.sh", []string{"configure", "0.0.0+git1.abc"}, []string{reload, restart}}, // deb upgrade
		{"postinstall.sh", []string{"abort-upgrade", "0.0.0+git1.abc"}, []string{reload}},
		{"postinstall.sh", []string{"1"}, []string{reload}},          // rpm install
		{"postinstall.sh", []string{"2"}, []string{reload, restart}}, // rpm upgrade
		{"preremove.sh", []string{"remove"}, []string{stop}},
		{"preremove.sh", []string{"upgrade", "0.0.0+git2.def"}, nil},
		{"preremove.sh", []string{"0"}, []string{stop}}, // rpm erase
		{"preremove.sh", []string{"1"}, nil},            // rpm upgrade
		{"postremove.sh", []string{"remove"}, []string{reload}},
		{"postremove.sh", []string{"purge"}, []string{reload}},
		{"postremove.sh", []string{"upgrade", "0.0.0+git2.def"}, nil},
		{"postremove.sh", []string{"0"}, []string{reload}},
		{"postremove.sh", []string{"1"}, nil},
	} {
		got := maint(t, scriptRoot(t, true), c.script, c.args...)
		if want := strings.Join(c.want, "\n"); got != want {
			t.Errorf("%s %q: systemctl %q, want %q", c.script, c.args, got, want)
		}
		// Without a running systemd (an image build, dpkg --root): nothing.
		if got := maint(t, scriptRoot(t, false), c.script, c.args...); got != "" {
			t.Errorf("%s %q without systemd: systemctl %q", c.script, c.args, got)
		}
	}
}

// The .deb's purge removes what the daemons wrote and the units'
// enablement links, and keeps a policy of the operator's; a removal keeps
// everything.
func TestPurgeRemovesTheData(t *testing.T) {
	data := []string{"var/lib/apmwatch/flight/a.rec", "var/log/apmwatch/findings.jsonl",
		"var/lib/private/apmwatch-fleet/nats/x", "var/log/private/apmwatch-fleet/findings.jsonl",
		"etc/systemd/system/multi-user.target.wants/apmwatch-audit.service"}
	kept := []string{"etc/apmwatch/policy.json", "etc/systemd/system/multi-user.target.wants/other.service"}
	setup := func() string {
		root := scriptRoot(t, true)
		for _, f := range append(slices.Clone(data), kept...) {
			p := filepath.Join(root, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range [][2]string{{"private/apmwatch-fleet", "var/lib/apmwatch-fleet"}, {"private/apmwatch-fleet", "var/log/apmwatch-fleet"}} {
			if err := os.Symlink(l[0], filepath.Join(root, l[1])); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	root := setup()
	maint(t, root, "postremove.sh", "remove")
	for _, f := range append(slices.Clone(data), kept...) {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("remove: %v", err)
		}
	}
	maint(t, root, "postremove.sh", "purge")
	for _, f := range append(slices.Clone(data), "var/lib/apmwatch-fleet", "var/log/apmwatch-fleet") {
		if _, err := os.Lstat(filepath.Join(root, f)); !os.IsNotExist(err) {
			t.Errorf("purge left %s (%v)", f, err)
		}
	}
	for _, f := range kept {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("purge: %v", err)
		}
	}
}
