//go:build labguest

package guest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A process name is any local user's to choose: here the kernel's comm of
// lab-pair started from a file named with a screen-clearing escape and a
// newline. trace's table, `qp list` and a postmortem of the recording show
// it escaped, never as terminal control and never as a line of its own.
func TestHostileCommEscaped(t *testing.T) {
	const name = "\x1b[2J\nforged" // the comm: a file name's first 15 bytes
	const shown = `\x1b[2J\x0aforged`
	src, err := exec.LookPath("lab-pair")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, name)
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	ready, rec := filepath.Join(dir, "ready"), filepath.Join(dir, "h.rec")
	tr := Start(t, "apmwatch", "trace", "--ready-file", ready, "--record", rec, "--reconcile-interval", "0")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("apmwatch trace not ready\n%s", tr.Dump())
		}
	}
	p := Start(t, bin, "--duration", "2m", "--behavior", "rearm-no-alt")
	p.Ready(t, 2)
	comm, err := os.ReadFile(filepath.Join("/proc", itoa(int64(p.cmd.Process.Pid)), "comm"))
	if err != nil || strings.TrimSuffix(string(comm), "\n") != name {
		t.Fatalf("the kernel's comm is %q (%v), want %q", comm, err, name)
	}
	check := func(what, out string) {
		t.Helper()
		if strings.ContainsRune(out, 0x1b) || !strings.Contains(out, shown) {
			t.Errorf("%s: the name is not shown escaped:\n%q", what, out)
		}
		safe(t, what, out)
	}
	list, err := exec.Command("apmwatch", "qp", "list", "--no-handles").Output()
	if err != nil {
		t.Fatalf("qp list: %v", err)
	}
	check("qp list", string(list))
	if err := p.Stop(t); err != nil {
		t.Errorf("lab-pair: %v", err)
	}
	time.Sleep(time.Second) // the destroys reach the table
	if err := tr.Stop(t); err != nil {
		t.Errorf("apmwatch trace: %v\n%s", err, tr.Stderr())
	}
	tr.mu.Lock()
	table := strings.Join(tr.bad, "\n")
	tr.mu.Unlock()
	check("trace table", table)
	// The text shows pairs without owners: nothing of the name may leak;
	// the JSON names the owner, escaped (docs/events.md).
	pm, err := exec.Command("apmwatch", "postmortem", "--all", rec).Output()
	if err != nil {
		t.Fatalf("postmortem: %v", err)
	}
	if strings.ContainsRune(string(pm), 0x1b) {
		t.Errorf("postmortem: a control character reaches the terminal:\n%q", pm)
	}
	safe(t, "postmortem", string(pm))
	js, err := exec.Command("apmwatch", "postmortem", "-o", "json", "--all", rec).Output()
	if err != nil {
		t.Fatalf("postmortem -o json: %v", err)
	}
	if strings.ContainsRune(string(js), 0x1b) || !strings.Contains(string(js), `"comm": "\\x1b[2J\\x0aforged"`) {
		t.Errorf("postmortem -o json: the owner is not named escaped:\n%s", js)
	}
}

// safe fails when a line of out starts with the text after the newline.
func safe(t *testing.T, what, out string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " │|"), "forged") {
			t.Errorf("%s: the name started a line:\n%s", what, out)
		}
	}
}
