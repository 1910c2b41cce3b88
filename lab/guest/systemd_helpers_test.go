//go:build labguest

package guest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pkgRoot is the .deb as dpkg-deb -x unpacks it (make lab-pkgroot).
const pkgRoot = "/usr/local/share/lab/pkgroot"

// installPackage copies the unpacked .deb into / as dpkg would (the
// maintainer scripts do nothing the units need: systemctl daemon-reload).
func installPackage(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir(pkgRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(pkgRoot, p)
		dst := filepath.Join("/", rel)
		switch t := d.Type(); {
		case t.IsDir():
			return os.MkdirAll(dst, 0o755)
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			os.Remove(dst)
			return os.Symlink(target, dst)
		default:
			info, err := d.Info()
			if err != nil {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, info.Mode().Perm())
		}
	})
	if err != nil {
		t.Fatalf("installing the package tree %s: %v", pkgRoot, err)
	}
}

// systemd is Debian's systemd as the guest's PID 1 (make lab-run
// LAB_INIT=systemd: the command is its unit lab-cmd.service).
type systemd struct{}

// startSystemd checks that systemd is PID 1 and installs the package.
func startSystemd(t *testing.T) *systemd {
	t.Helper()
	if b, _ := os.ReadFile("/proc/1/comm"); strings.TrimSpace(string(b)) != "systemd" {
		t.Fatalf("PID 1 is %q, not systemd: this test runs in a guest booted with LAB_INIT=systemd (make lab-systemd)", strings.TrimSpace(string(b)))
	}
	installPackage(t)
	s := &systemd{}
	s.mustCtl(t, "daemon-reload")
	return s
}

// ctl runs systemctl.
func (s *systemd) ctl(args ...string) (string, error) {
	c := exec.Command("systemctl", append([]string{"--no-pager", "--no-ask-password"}, args...)...)
	c.Env = append(os.Environ(), "SYSTEMD_COLORS=0", "TERM=dumb")
	out, err := c.CombinedOutput()
	return string(out), err
}

// mustCtl runs systemctl and fails the test if it fails.
func (s *systemd) mustCtl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := s.ctl(args...)
	if err != nil {
		t.Fatalf("systemctl %s: %v\n%s\n%s", strings.Join(args, " "), err, out, s.status(args[len(args)-1]))
	}
	return out
}

// show returns one property of a unit.
func (s *systemd) show(t *testing.T, unit, prop string) string {
	t.Helper()
	return strings.TrimSpace(s.mustCtl(t, "show", "-p", prop, "--value", unit))
}

// status is what an operator looks at: systemctl status and the unit's journal.
func (s *systemd) status(unit string) string {
	st, _ := s.ctl("status", unit)
	j, _ := exec.Command("journalctl", "--no-pager", "-n", "40", "-u", unit).CombinedOutput()
	return st + "\n" + string(j)
}

// restart reloads the unit files and restarts unit; it waits until the
// unit is active and returns its main PID.
func (s *systemd) restart(t *testing.T, unit string) int {
	t.Helper()
	s.mustCtl(t, "daemon-reload")
	s.mustCtl(t, "restart", unit)
	return s.waitActive(t, unit)
}

func (s *systemd) waitActive(t *testing.T, unit string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s.show(t, unit, "ActiveState") == "active" {
			if pid, _ := strconv.Atoi(s.show(t, unit, "MainPID")); pid > 0 {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not active in 30s\n%s", unit, s.status(unit))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// scrapeFrom fetches http://addr/metrics from the local address from ("":
// any); it gives up after 3 s (a dropped SYN is never answered).
func scrapeFrom(from, addr string) (string, error) {
	d := net.Dialer{Timeout: 3 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != 200 {
		err = errors.New(resp.Status)
	}
	return string(b), err
}

// waitMetric scrapes addr until series has value want.
func waitMetric(t *testing.T, s *systemd, unit, addr, series, want string) {
	t.Helper()
	waitMetricFrom(t, s, unit, "", addr, series, want)
}

// waitMetricFrom scrapes addr from the local address from until series
// has value want.
func waitMetricFrom(t *testing.T, s *systemd, unit, from, addr, series, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var page string
	for {
		p, err := scrapeFrom(from, addr)
		if err == nil {
			page = p
			if metricValue(page, series) == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s on %s: %q, want %s (err %v)\n%s", series, addr, metricValue(page, series), want, err, s.status(unit))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// dropIn writes /etc/systemd/system/UNIT.d/NAME with content, as an
// operator enabling an opt-in drop-in does ("" content: a link to the
// packaged file).
func dropIn(t *testing.T, unit, name, content string) {
	t.Helper()
	dir := filepath.Join("/etc/systemd/system", unit+".d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, name)
	os.Remove(dst)
	var err error
	if content == "" {
		err = os.Symlink(filepath.Join("/usr/share/apmwatch/systemd", unit+".d", name), dst)
	} else {
		err = os.WriteFile(dst, []byte(content), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// packagedDropIn reads the packaged opt-in drop-in NAME of unit.
func packagedDropIn(t *testing.T, unit, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/usr/share/apmwatch/systemd", unit+".d", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitPositive scrapes addr until the counter series is above zero.
func waitPositive(t *testing.T, s *systemd, addr, series string, units ...string) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		page, err := scrapeFrom("", addr)
		if v, perr := strconv.ParseFloat(metricValue(page, series), 64); err == nil && perr == nil && v > 0 {
			return
		}
		if time.Now().After(deadline) {
			var st []string
			for _, u := range units {
				st = append(st, s.status(u))
			}
			t.Fatalf("%s on %s never above 0 (err %v)\n%s", series, addr, err, strings.Join(st, "\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitListening waits for a TCP socket listening on addr (IPv4), read from
// /proc/net/tcp: the unit's IP allow list may keep even this host out.
func waitListening(t *testing.T, s *systemd, unit, addr string) {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	b4 := ap.Addr().As4()
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", b4[3], b4[2], b4[1], b4[0], ap.Port())
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/net/tcp")
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 3 && f[1] == want && f[3] == "0A" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after 30s\n%s", addr, s.status(unit))
		}
		time.Sleep(300 * time.Millisecond)
	}
}
