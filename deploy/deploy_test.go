// Package deploy holds the systemd unit and the Kubernetes DaemonSet of
// apmwatch audit; its tests check them.
package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The unit and its enforce drop-in pass systemd-analyze verify, which
// loads the drop-in from the unit's directory. ExecStart must name an
// executable file: the test binary stands in for /usr/local/bin/apmwatch.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze missing: install systemd (Debian has it)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyWith := func(from, to string) string {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), "/usr/local/bin/apmwatch", self)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return s
	}
	unit := copyWith("apmwatch-audit.service", filepath.Join(dir, "apmwatch-audit.service"))
	dropin := copyWith("apmwatch-audit.service.d/enforce.conf", filepath.Join(dir, "apmwatch-audit.service.d", "enforce.conf"))
	for _, want := range []string{"IPAddressDeny=any\n", "IPAddressAllow=localhost\n", "SystemCallFilter=@system-service bpf perf_event_open\n",
		"SystemCallErrorNumber=EPERM\n", "CapabilityBoundingSet=CAP_BPF CAP_PERFMON CAP_SYS_ADMIN CAP_SYSLOG CAP_SYS_RESOURCE\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	for _, want := range []string{"--metrics-addr 127.0.0.1:9578 \\\n\t$APMWATCH_ENFORCE_ARGS $APMWATCH_PUBLISH_ARGS\n",
		"Environment=APMWATCH_ENFORCE_ARGS= APMWATCH_PUBLISH_ARGS=\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	for _, want := range []string{"Environment=\"APMWATCH_ENFORCE_ARGS=--policy /etc/apmwatch/policy.json --enforce\"\n",
		"CapabilityBoundingSet=CAP_SYS_PTRACE\n", "AmbientCapabilities=CAP_SYS_PTRACE\n", "SystemCallFilter=pidfd_getfd\n"} {
		if !strings.Contains(dropin, want) {
			t.Errorf("enforce drop-in lacks %q", want)
		}
	}
	var out bytes.Buffer
	cmd := exec.Command(analyze, "verify", filepath.Join(dir, "apmwatch-audit.service"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out.String())
	}
	// verify exits 0 on unknown keys and bad values; every line about our
	// files is a complaint, except the system calls this host's libseccomp
	// does not know yet (systemd's groups name newer ones).
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, dir) && !strings.Contains(l, "Failed to parse system call, ignoring") {
			t.Errorf("systemd-analyze verify: %s", l)
		}
	}
}

func render(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command("sh", append([]string{"render.sh"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

const digest = "ghcr.io/apmwatch/apmwatch@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestRenderDaemonSet(t *testing.T) {
	y, _, err := render(t, digest)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`image: "` + digest + `"`, "automountServiceAccountToken: false",
		"seccompProfile: {type: RuntimeDefault}", "--metrics-addr=127.0.0.1:9578", "annotations: {}", "ports: []",
		`httpGet: {host: "127.0.0.1", path: /metrics, port: 9578}`, "drop: [ALL]", "allowPrivilegeEscalation: false"} {
		if !strings.Contains(y, want) {
			t.Errorf("default rendering lacks %q", want)
		}
	}
	if strings.Contains(y, "@") && strings.Contains(strings.ReplaceAll(y, "@sha256:", ""), "@") || strings.Contains(y, "prometheus.io/scrape") {
		t.Errorf("placeholder left, or metrics announced on the node without METRICS=node:\n%s", y)
	}
	y, _, err = render(t, digest, "node")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--metrics-addr=$(NODE_IP):9578", `prometheus.io/scrape: "true"`, "containerPort: 9578",
		"httpGet: {path: /metrics, port: 9578}"} {
		if !strings.Contains(y, want) {
			t.Errorf("METRICS=node rendering lacks %q", want)
		}
	}
	for _, bad := range [][]string{{"ghcr.io/apmwatch/apmwatch:latest"}, {""}, {digest[:len(digest)-1]}, {digest, "everywhere"}} {
		_, msg, err := render(t, bad...)
		if err == nil || strings.Count(strings.TrimSpace(msg), "\n") != 0 || !strings.HasPrefix(msg, "render: ") {
			t.Errorf("%q: want one line of refusal, got %v %q", bad, err, msg)
		}
	}
}

// The opt-in drop-ins add to the unit and never set ExecStart: systemd
// applies drop-ins in name order, and a reset of ExecStart in one would
// throw away the command line of every drop-in before it. Each sets only
// the variables the unit's command line carries.
func TestDropInsAdd(t *testing.T) {
	unit, err := os.ReadFile("apmwatch-audit.service")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("apmwatch-audit.service.d/*.conf")
	if len(files) != 3 {
		t.Fatalf("drop-ins: %q, want enforce.conf, metrics.conf, publish.conf", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "ExecStart") {
				t.Errorf("%s: %q: a drop-in must not set ExecStart", f, l)
			}
			if v, ok := strings.CutPrefix(l, "Environment=\""); ok {
				name, _, _ := strings.Cut(v, "=")
				dflt := regexp.MustCompile(`(?m)^Environment=(.* )?` + name + `=`)
				if !strings.Contains(string(unit), "$"+name) || !dflt.Match(unit) {
					t.Errorf("%s: sets %s, which the unit neither carries on its command line nor defaults", f, name)
				}
			}
		}
	}
}

// The fleet's unit and the audit unit with all its opt-in drop-ins at once
// pass systemd-analyze verify too.
func TestFleetUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze missing: install systemd (Debian has it)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"apmwatch-fleet.service", "apmwatch-audit.service", "apmwatch-audit.service.d/publish.conf",
		"apmwatch-audit.service.d/enforce.conf", "apmwatch-audit.service.d/metrics.conf"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/apmwatch", self)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile("apmwatch-audit.service.d/publish.conf"); !strings.Contains(string(b), "IPAddressAllow=") ||
		!strings.Contains(string(b), "APMWATCH_PUBLISH_ARGS=--publish nats://") {
		t.Errorf("publish drop-in: %s", b)
	}
	if b, _ := os.ReadFile("apmwatch-audit.service.d/metrics.conf"); !strings.Contains(string(b), "\nIPAddressAllow=198.51.100.0/24\n") {
		t.Errorf("metrics drop-in: %s", b)
	}
	for _, unit := range []string{"apmwatch-fleet.service", "apmwatch-audit.service"} {
		var out bytes.Buffer
		cmd := exec.Command(analyze, "verify", filepath.Join(dir, unit))
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("systemd-analyze verify %s: %v\n%s", unit, err, out.String())
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, dir) && !strings.Contains(l, "Failed to parse system call, ignoring") {
				t.Errorf("systemd-analyze verify %s: %s", unit, l)
			}
		}
	}
}
