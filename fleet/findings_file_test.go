package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
)

// logrotate moves the finding log and sends SIGHUP: the next line goes to
// a new file at the path, none is lost, and the instance says so.
func TestFleetReopensItsFindingLog(t *testing.T) {
	url := fleettest.NATS(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "findings.jsonl")
	hup := make(chan os.Signal, 1)
	f := startFleetWith(t, url, 0, 1, func(c *Config) { c.Findings, c.Reload = path, hup })
	defer f.stop()
	a, b := twoHosts(t, url)
	oneSidedFrom(a, b, 100, 200, 1)
	lines := func(p string) int {
		data, _ := os.ReadFile(p)
		return strings.Count(string(data), "\n")
	}
	fleettest.WaitFor(t, 20*time.Second, "the first line", func() bool { return lines(path) == 1 })
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	hup <- syscall.SIGHUP
	fleettest.WaitFor(t, 10*time.Second, "the reopen logged", func() bool { return strings.Contains(f.log.String(), "finding log reopened") })
	oneSidedFrom(a, b, 101, 201, 1)
	fleettest.WaitFor(t, 20*time.Second, "the second line in a new file", func() bool { return lines(path) == 1 })
	if n := lines(path + ".1"); n != 1 {
		t.Fatalf("the moved log holds %d lines, want the first only", n)
	}
}
