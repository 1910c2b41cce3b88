//go:build labguest

// The packaged units started by Debian's systemd (the guest's PID 1 with
// LAB_INIT=systemd: make lab-systemd), as installed from the .deb: the audit daemon
// with /etc/default/apmwatch and the package's drop-in, then each opt-in
// drop-in enabled as docs/audit.md says (metrics.conf: a scrape from
// another address; enforce.conf: a real rearm of another process's QP;
// publish.conf: records reaching the packaged fleet unit), reload, and a
// clean stop under SIGTERM.
package guest

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/actuator"
)

const (
	auditUnit = "apmwatch-audit.service"
	fleetUnit = "apmwatch-fleet.service"
	// The packaged defaults (/etc/default/apmwatch, -fleet).
	pkgAuditMetrics = "127.0.0.1:9578"
	pkgFleetMetrics = "127.0.0.1:9579"
	pkgFindings     = "/var/log/apmwatch/findings.jsonl"
)

func TestPackagedUnitsUnderSystemd(t *testing.T) {
	s := startSystemd(t)

	t.Run("audit as packaged", func(t *testing.T) {
		pid := s.restart(t, auditUnit)
		if got := cmdline(t, pid); !strings.HasPrefix(got, "/usr/bin/apmwatch audit --findings "+pkgFindings) {
			t.Fatalf("the daemon runs %q, want /usr/bin/apmwatch audit with /etc/default/apmwatch's flags", got)
		}
		waitMetric(t, s, auditUnit, pkgAuditMetrics, "apmwatch_probes_up", "1")
		_, q := migrateNoRearm(t, "rxe0")
		waitKindOn(t, pkgFindings, "missed-rearm", "rxe0", q, 1)
		if j := s.status(auditUnit); !strings.Contains(j, "apmwatch") || !strings.Contains(j, "active (running)") {
			t.Errorf("systemctl status / journalctl show no running daemon:\n%s", j)
		}
	})

	t.Run("reload reopens, same process", func(t *testing.T) {
		before := s.waitActive(t, auditUnit)
		s.mustCtl(t, "reload", auditUnit)
		if after := s.waitActive(t, auditUnit); after != before {
			t.Fatalf("systemctl reload restarted the daemon: PID %d -> %d", before, after)
		}
	})

	t.Run("metrics.conf opens the port to a remote scraper", func(t *testing.T) {
		// The operator's two steps: the host's address in the defaults
		// file, the Prometheus network in a copy of metrics.conf.
		setDefaults(t, "/etc/default/apmwatch", "--metrics-addr 127.0.0.1:9578", "--metrics-addr 192.168.77.1:9578")
		t.Cleanup(func() {
			os.Remove("/etc/systemd/system/" + auditUnit + ".d/metrics.conf")
			setDefaults(t, "/etc/default/apmwatch", "--metrics-addr 192.168.77.1:9578", "--metrics-addr 127.0.0.1:9578")
		})
		s.restart(t, auditUnit)
		waitListening(t, s, auditUnit, "192.168.77.1:9578")
		if _, err := scrapeFrom("192.168.77.2", "192.168.77.1:9578"); err == nil {
			t.Fatal("a scrape from 192.168.77.2 went through without metrics.conf: the unit allows loopback only")
		}
		conf := regexp.MustCompile(`(?m)^IPAddressAllow=.*$`).ReplaceAllString(
			packagedDropIn(t, auditUnit, "metrics.conf"), "IPAddressAllow=192.168.77.0/24")
		dropIn(t, auditUnit, "metrics.conf", conf)
		s.restart(t, auditUnit)
		waitListening(t, s, auditUnit, "192.168.77.1:9578")
		waitMetricFrom(t, s, auditUnit, "192.168.77.2", "192.168.77.1:9578", "apmwatch_probes_up", "1")
	})

	t.Run("enforce.conf rearms another process's QP", func(t *testing.T) {
		if err := os.MkdirAll("/etc/apmwatch", 0o755); err != nil {
			t.Fatal(err)
		}
		writePolicy(t, "/etc/apmwatch", labPolicy(actuator.ModeMonitor))
		dropIn(t, auditUnit, "enforce.conf", "") // a link to the packaged file
		t.Cleanup(func() { os.Remove("/etc/systemd/system/" + auditUnit + ".d/enforce.conf") })
		pid := s.restart(t, auditUnit)
		if got := cmdline(t, pid); !strings.Contains(got, "--policy /etc/apmwatch/policy.json --enforce") {
			t.Fatalf("with enforce.conf the daemon runs %q", got)
		}
		waitMetric(t, s, auditUnit, pkgAuditMetrics, "apmwatch_probes_up", "1")
		p, owner, qpn := migratedPair(t)
		waitKind(t, pkgFindings, string(actuator.KindActuated), qpn, 1)
		if got := ownerView(t, p, owner, qpn); got != "REARM" {
			t.Fatalf("under the enforce drop-in the owner reads %s, want REARM\n%s", got, s.status(auditUnit))
		}
	})

	t.Run("fleet as packaged, publish.conf", func(t *testing.T) {
		s.restart(t, fleetUnit)
		waitMetric(t, s, fleetUnit, pkgFleetMetrics, "apmwatch_fleet_ends", "0")
		if u := s.show(t, fleetUnit, "DynamicUser"); u != "yes" {
			t.Fatalf("fleet unit DynamicUser=%s", u)
		}
		conf := packagedDropIn(t, auditUnit, "publish.conf")
		conf = regexp.MustCompile(`(?m)^Environment=.*$`).ReplaceAllString(conf, `Environment="APMWATCH_PUBLISH_ARGS=--publish nats://127.0.0.1:4222"`)
		conf = regexp.MustCompile(`(?m)^IPAddressAllow=.*$`).ReplaceAllString(conf, "IPAddressAllow=127.0.0.1")
		dropIn(t, auditUnit, "publish.conf", conf)
		s.restart(t, auditUnit)
		waitMetric(t, s, auditUnit, pkgAuditMetrics, "apmwatch_probes_up", "1")
		fleetIBPair(t, 1, "rearm")
		waitPositive(t, s, pkgFleetMetrics, "apmwatch_fleet_records_total", fleetUnit, auditUnit)
	})

	t.Run("stop: SIGTERM, exit 0", func(t *testing.T) {
		for _, u := range []string{auditUnit, fleetUnit} {
			s.mustCtl(t, "stop", u)
			if r, st := s.show(t, u, "Result"), s.show(t, u, "ExecMainStatus"); r != "success" || st != "0" {
				t.Errorf("%s stopped with Result=%s ExecMainStatus=%s, want success 0\n%s", u, r, st, s.status(u))
			}
		}
		if _, err := os.Stat(pkgFindings); err != nil {
			t.Errorf("finding log after stop: %v", err)
		}
	})
}

// cmdline is a process's command line, words joined by spaces.
// A Type=simple unit is started once systemd forked its child, which is
// named "(apmwatch)" until it executes the binary: the command line is
// read once it has.
func cmdline(t *testing.T, pid int) string {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		s := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		if !strings.HasPrefix(s, "(") || !strings.HasSuffix(s, ")") || time.Now().After(end) {
			return s
		}
	}
}

// setDefaults replaces old with new in a defaults file, as an operator edits it.
func setDefaults(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q:\n%s", path, old, b)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o640); err != nil {
		t.Fatal(err)
	}
}
