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

const (
	optIn     = "/usr/share/apmwatch/systemd/apmwatch-audit.service.d/"
	auditDir  = "/etc/systemd/system/apmwatch-audit.service.d/"
	promNet   = "203.0.113.0/24" // what an operator writes into metrics.conf
	hostAddr  = "192.0.2.5:9578" // and into /etc/default/apmwatch's --metrics-addr
	auditUnit = "apmwatch-audit.service"
)

// verify runs systemd-analyze verify in root; it exits 0 on unknown keys
// and bad values, so every line naming a file of the root is a complaint,
// except the system calls this host's libseccomp does not know yet.
func verify(t *testing.T, root, unit string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command("systemd-analyze", "verify", "--root="+root, unit)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unit, err, out.String())
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, root) && !strings.Contains(l, "Failed to parse system call, ignoring") {
			t.Errorf("systemd-analyze verify %s: %s", unit, l)
		}
	}
}

// effective merges the unit's files as systemd finds them in root.
func effective(t *testing.T, root, unit string) (merged, []string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command("systemd-analyze", "cat-config", "--root="+root, "systemd/system/"+unit)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || errb.Len() > 0 {
		t.Fatalf("systemd-analyze cat-config %s: %v\n%s", unit, err, errb.String())
	}
	m, err := mergeCatConfig(out.String(), root)
	if err != nil {
		t.Fatal(err)
	}
	argv, err := m.argv(root)
	if err != nil {
		t.Fatalf("%s: %v", unit, err)
	}
	// The installed binary accepts every flag of the command line.
	help := append(slices.Clone(argv[1:]), "--help")
	if out, err := exec.Command(filepath.Join(root, argv[0]), help...).CombinedOutput(); err != nil {
		t.Errorf("%s: %q --help: %v\n%s", unit, argv, err, out)
	}
	return m, argv
}

// enable puts the opt-in drop-ins in /etc as the docs say: enforce.conf
// linked (relatively: systemd-analyze --root does not follow an absolute
// link into the root; on a host the absolute link of the docs is the same
// file), publish.conf and metrics.conf copied, metrics.conf with the
// Prometheus servers' network edited in.
func enable(t *testing.T, root string, names ...string) {
	t.Helper()
	dir := filepath.Join(root, auditDir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		src := filepath.Join(root, optIn, n)
		if n == "enforce.conf" {
			rel, err := filepath.Rel(dir, src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(rel, filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(b), "IPAddressAllow=198.51.100.0/24", "IPAddressAllow="+promNet, 1)
		if n == "metrics.conf" && s == string(b) {
			t.Fatal("metrics.conf: no IPAddressAllow=198.51.100.0/24 placeholder to edit")
		}
		if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkUnits: the installed units verify, and with each opt-in drop-in
// enabled, and all at once, the effective command line and privileges are
// the package's plus exactly what the drop-ins add.
func checkUnits(t *testing.T, root string) {
	base := []string{"/usr/bin/apmwatch", "audit", "--findings", "/var/log/apmwatch/findings.jsonl",
		"--recorder-dir", "/var/lib/apmwatch", "--metrics-addr", "127.0.0.1:9578"}
	enforceArgs := []string{"--policy", "/etc/apmwatch/policy.json", "--enforce"}
	publishArgs := []string{"--publish", "nats://nats1.example:4222,nats://nats2.example:4222,nats://nats3.example:4222",
		"--nats-creds", "/etc/apmwatch/nats.creds", "--nats-tls-ca", "/etc/apmwatch/nats-ca.pem"}
	caps := []string{"CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN", "CAP_SYSLOG", "CAP_SYS_RESOURCE"}
	defaults := filepath.Join(root, "etc/default/apmwatch")
	orig, err := os.ReadFile(defaults)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		drop  []string
		argv  []string
		caps  []string
		allow []string
		calls []string
	}{
		{"package", nil, base, caps, []string{"localhost"}, nil},
		{"enforce", []string{"enforce.conf"}, append(slices.Clone(base), enforceArgs...),
			append(slices.Clone(caps), "CAP_SYS_PTRACE"), []string{"localhost"}, []string{"pidfd_getfd"}},
		{"publish", []string{"publish.conf"}, append(slices.Clone(base), publishArgs...),
			caps, []string{"localhost", "192.0.2.11", "192.0.2.12", "192.0.2.13"}, nil},
		{"metrics", []string{"metrics.conf"}, append(slices.Clone(base[:7]), hostAddr),
			caps, []string{"localhost", promNet}, nil},
		{"all", []string{"enforce.conf", "publish.conf", "metrics.conf"},
			slices.Concat(base[:7], []string{hostAddr}, enforceArgs, publishArgs), append(slices.Clone(caps), "CAP_SYS_PTRACE"),
			[]string{"localhost", promNet, "192.0.2.11", "192.0.2.12", "192.0.2.13"}, []string{"pidfd_getfd"}},
	} {
		t.Run("audit-"+c.name, func(t *testing.T) {
			enable(t, root, c.drop...)
			d := orig
			if slices.Contains(c.drop, "metrics.conf") { // the docs' other step: the host's address
				d = bytes.Replace(orig, []byte("--metrics-addr 127.0.0.1:9578"), []byte("--metrics-addr "+hostAddr), 1)
			}
			if err := os.WriteFile(defaults, d, 0o640); err != nil {
				t.Fatal(err)
			}
			verify(t, root, auditUnit)
			m, argv := effective(t, root, auditUnit)
			wantFiles := []string{"/usr/lib/systemd/system/" + auditUnit, "/usr/lib/systemd/system/apmwatch-audit.service.d/10-package.conf"}
			for _, n := range c.drop {
				wantFiles = append(wantFiles, auditDir+n)
			}
			slices.Sort(wantFiles[2:])
			if !slices.Equal(m.files, wantFiles) {
				t.Errorf("files applied %q, want %q", m.files, wantFiles)
			}
			if !slices.Equal(argv, c.argv) {
				t.Errorf("ExecStart\n %q, want\n %q", argv, c.argv)
			}
			bounding := slices.Sorted(slices.Values(m.lists["CapabilityBoundingSet"]))
			if !slices.Equal(m.lists["AmbientCapabilities"], c.caps) || !slices.Equal(bounding, slices.Sorted(slices.Values(c.caps))) {
				t.Errorf("AmbientCapabilities %q, CapabilityBoundingSet %q, want %q", m.lists["AmbientCapabilities"], bounding, c.caps)
			}
			if !slices.Equal(m.lists["IPAddressAllow"], c.allow) || !slices.Equal(m.lists["IPAddressDeny"], []string{"any"}) {
				t.Errorf("IPAddressAllow %q (want %q), IPAddressDeny %q (want any)", m.lists["IPAddressAllow"], c.allow, m.lists["IPAddressDeny"])
			}
			calls := m.lists["SystemCallFilter"]
			if !slices.Contains(calls, "bpf") || slices.Contains(calls, "pidfd_getfd") != (c.calls != nil) {
				t.Errorf("SystemCallFilter %q, want pidfd_getfd only with enforce.conf", calls)
			}
		})
	}
	enable(t, root)
	if err := os.WriteFile(defaults, orig, 0o640); err != nil {
		t.Fatal(err)
	}

	// The fleet unit reads its own defaults file, not the audit's.
	t.Run("fleet-package", func(t *testing.T) {
		if err := os.WriteFile(defaults, append(slices.Clone(orig), "APMWATCH_FLEET_ARGS=--not-this-one\n"...), 0o640); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(defaults, orig, 0o640)
		verify(t, root, "apmwatch-fleet.service")
		m, argv := effective(t, root, "apmwatch-fleet.service")
		want := []string{"/usr/bin/apmwatch", "fleet", "--store", "/var/lib/apmwatch-fleet/nats",
			"--findings", "/var/log/apmwatch-fleet/findings.jsonl", "--metrics-addr", "127.0.0.1:9579"}
		if !slices.Equal(argv, want) || !slices.Equal(m.envFiles, []string{"/etc/default/apmwatch-fleet"}) {
			t.Errorf("fleet: ExecStart %q, want %q; EnvironmentFile %q", argv, want, m.envFiles)
		}
	})
}
