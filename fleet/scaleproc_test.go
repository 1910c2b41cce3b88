package fleet

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
)

// The scale tests run the fleet as users do: the apmwatch binary, built
// from this tree, in a process of its own (its CPU time and RSS are its
// own).
var apmwatchBin fleettest.Built

func apmwatchBinary(t *testing.T) string {
	t.Helper()
	return apmwatchBin.Get(t, "apmwatch", func() (string, error) {
		dir, err := os.MkdirTemp("", "apmwatch-test-bin")
		if err != nil {
			return "", err
		}
		path := filepath.Join(dir, "apmwatch")
		if out, err := exec.Command(fleettest.GoBinary(), "build", "-o", path, "../cmd/apmwatch").CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build ../cmd/apmwatch: %v: %s", err, out)
		}
		return path, nil
	})
}

// fleetProc is one `apmwatch fleet` process.
type fleetProc struct {
	t        *testing.T
	cmd      *exec.Cmd
	stderr   *syncBuffer
	ready    string
	findings string
	metrics  string
	started  time.Time
	exited   chan struct{}
}

// startFleetProc starts `apmwatch fleet` against url with args added;
// findings go to findings (appended).
func startFleetProc(t *testing.T, url, findings string, args ...string) *fleetProc {
	t.Helper()
	f := &fleetProc{t: t, stderr: &syncBuffer{}, ready: filepath.Join(t.TempDir(), "ready"), findings: findings,
		metrics: fleettest.FreePort(t), exited: make(chan struct{})}
	all := append([]string{"fleet", "--nats", url, "--ready-file", f.ready, "--findings", findings, "--metrics-addr", f.metrics}, args...)
	f.cmd = exec.Command(apmwatchBinary(t), all...)
	f.cmd.Stderr = f.stderr
	f.started = time.Now()
	if err := f.cmd.Start(); err != nil {
		t.Fatalf("starting apmwatch fleet: %v", err)
	}
	go func() { f.cmd.Wait(); close(f.exited) }()
	t.Cleanup(func() { f.signal(syscall.SIGKILL); <-f.exited })
	return f
}

// waitReady waits for the ready file and says how long the start took.
func (f *fleetProc) waitReady(limit time.Duration) time.Duration {
	f.t.Helper()
	fleettest.WaitFor(f.t, limit, "the fleet's ready file", func() bool {
		select {
		case <-f.exited:
			f.t.Fatalf("apmwatch fleet exited: %s", f.stderr.String())
		default:
		}
		_, err := os.Stat(f.ready)
		return err == nil
	})
	return time.Since(f.started)
}

func (f *fleetProc) signal(s syscall.Signal) { f.cmd.Process.Signal(s) }

// stop ends the process with SIGTERM and waits for it.
func (f *fleetProc) stop() {
	f.signal(syscall.SIGTERM)
	select {
	case <-f.exited:
	case <-time.After(time.Minute):
		f.t.Fatalf("apmwatch fleet did not stop in a minute")
	}
}

// cpu is the process's CPU time so far (user and system).
func (f *fleetProc) cpu() time.Duration {
	f.t.Helper()
	return procCPU(f.t, f.cmd.Process.Pid)
}

// procCPU is a process's CPU time so far (user and system).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// the fields after the command name (which may hold spaces):
	// utime and stime are the 12th and 13th
	fs := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	u, _ := strconv.ParseUint(fs[11], 10, 64)
	s, _ := strconv.ParseUint(fs[12], 10, 64)
	return time.Duration(u+s) * time.Second / 100 // USER_HZ
}

// rss is the process's resident set now and at its peak, MiB.
func (f *fleetProc) rss() (now, peak float64) {
	f.t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(f.cmd.Process.Pid) + "/status")
	if err != nil {
		f.t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch k {
		case "VmRSS":
			now = kb / 1024
		case "VmHWM":
			peak = kb / 1024
		}
	}
	return now, peak
}

// metric is one series of the process's metrics (-1 while they cannot
// be read).
func (f *fleetProc) metric(series string) float64 {
	c := http.Client{Timeout: 5 * time.Second}
	r, err := c.Get("http://" + f.metrics + "/metrics")
	if err != nil {
		return -1
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			x, _ := strconv.ParseFloat(v, 64)
			return x
		}
	}
	return -1
}

// logged says whether the process logged a line holding every part.
func (f *fleetProc) logged(parts ...string) bool {
	for _, l := range strings.Split(f.stderr.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// profile takes a 10 s CPU profile of the process into dir (none when
// dir is ""), from now, then a heap profile; the channel closes when both
// are written.
func (f *fleetProc) profile(dir string, n int) <-chan struct{} {
	done := make(chan struct{})
	if dir == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		f.fetchProfile("/debug/pprof/profile?seconds=10", filepath.Join(dir, fmt.Sprintf("fleet-storm-%d.prof", n)))
		f.fetchProfile("/debug/pprof/heap?gc=1", filepath.Join(dir, fmt.Sprintf("fleet-storm-%d.heap", n)))
	}()
	return done
}

// fetchProfile writes the process's profile at path (a pprof URL path).
func (f *fleetProc) fetchProfile(url, path string) {
	c := http.Client{Timeout: time.Minute}
	r, err := c.Get("http://" + f.metrics + url)
	if err != nil {
		f.t.Errorf("profile: %v", err)
		return
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		f.t.Errorf("profile: %v", err)
	}
	f.t.Logf("profile of the storm: %s", path)
}
