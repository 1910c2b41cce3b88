//go:build labguest

// Helpers for the guest tests (see doc.go).
package guest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// Line is one JSON object a lab program printed. Numbers keep their literal
// text (json.Number), so Match can compare them with fmt.Sprint.
type Line map[string]any

// Str returns the field as text ("" when absent).
func (l Line) Str(key string) string {
	v, ok := l[key]
	if !ok || v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// Int returns a numeric field, or -1 when absent or not a number.
func (l Line) Int(key string) int64 {
	n, err := strconv.ParseInt(l.Str(key), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// Has reports whether the field is present.
func (l Line) Has(key string) bool {
	_, ok := l[key]
	return ok
}

func (l Line) String() string {
	b, _ := json.Marshal(map[string]any(l))
	return string(b)
}

// ParseLine decodes one JSON line.
func ParseLine(s string) (Line, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var l Line
	if err := d.Decode(&l); err != nil {
		return nil, fmt.Errorf("not a JSON line: %q: %w", s, err)
	}
	return l, nil
}

// ParseLines decodes every non-empty line of out.
func ParseLines(out []byte) ([]Line, error) {
	var ls []Line
	for _, s := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		l, err := ParseLine(s)
		if err != nil {
			return ls, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// Match returns a predicate for lines whose fields equal the given
// key, value pairs (compared as text: Match("qpn", 17, "ready", true)).
func Match(kv ...any) func(Line) bool {
	if len(kv)%2 != 0 {
		panic("Match needs key, value pairs")
	}
	return func(l Line) bool {
		for i := 0; i < len(kv); i += 2 {
			k := kv[i].(string)
			if !l.Has(k) || l.Str(k) != fmt.Sprint(kv[i+1]) {
				return false
			}
		}
		return true
	}
}

// Filter returns the lines that match.
func Filter(ls []Line, match func(Line) bool) []Line {
	var out []Line
	for _, l := range ls {
		if match(l) {
			out = append(out, l)
		}
	}
	return out
}

// Proc is a running lab program that prints JSON lines.
type Proc struct {
	Name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	cond   *sync.Cond
	lines  []Line
	bad    []string // stdout lines that were not JSON
	stderr bytes.Buffer
	done   bool
	err    error // from Wait
}

// Start runs a program in the background; the test's cleanup stops it.
func Start(t testing.TB, name string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, cmd: exec.Command(name, args...)}
	p.cond = sync.NewCond(&p.mu)
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go p.read(out)
	t.Cleanup(func() { p.Stop(t) })
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

func (p *Proc) read(r io.Reader) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		l, err := ParseLine(s.Text())
		p.mu.Lock()
		if err != nil {
			p.bad = append(p.bad, s.Text())
		} else {
			p.lines = append(p.lines, l)
		}
		p.cond.Broadcast()
		p.mu.Unlock()
	}
	err := p.cmd.Wait()
	p.mu.Lock()
	p.done, p.err = true, err
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Lines returns a copy of the lines printed so far.
func (p *Proc) Lines() []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Line(nil), p.lines...)
}

// Stderr returns what the program wrote on stderr so far.
func (p *Proc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// Dump describes the program's output for a failure message.
func (p *Proc) Dump() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%s stdout:\n", p.Name)
	for _, l := range p.lines {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	for _, s := range p.bad {
		fmt.Fprintf(&b, "  (not JSON) %s\n", s)
	}
	fmt.Fprintf(&b, "%s stderr: %s", p.Name, p.stderr.String())
	return b.String()
}

// WaitN waits until n lines after index from match and returns them with the
// index after the last one; it fails the test on timeout or early exit.
func (p *Proc) WaitN(t testing.TB, from, n int, timeout time.Duration, match func(Line) bool) ([]Line, int) {
	t.Helper()
	ls, next, err := p.waitN(from, n, timeout, match)
	if err != nil {
		t.Fatalf("%v\n%s", err, p.Dump())
	}
	return ls, next
}

// Wait waits for the first line after index from that matches.
func (p *Proc) Wait(t testing.TB, from int, timeout time.Duration, match func(Line) bool) (Line, int) {
	t.Helper()
	ls, next := p.WaitN(t, from, 1, timeout, match)
	return ls[0], next
}

func (p *Proc) waitN(from, n int, timeout time.Duration, match func(Line) bool) ([]Line, int, error) {
	timer := time.AfterFunc(timeout, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(timeout)
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		var got []Line
		i := from
		for ; i < len(p.lines) && len(got) < n; i++ {
			if match(p.lines[i]) {
				got = append(got, p.lines[i])
			}
		}
		if len(got) == n {
			return got, i, nil
		}
		if p.done {
			return nil, 0, fmt.Errorf("%s exited (%v) before printing %d matching lines", p.Name, p.err, n)
		}
		if !time.Now().Before(deadline) {
			return nil, 0, fmt.Errorf("%s: %d matching lines not printed within %s", p.Name, n, timeout)
		}
		p.cond.Wait()
	}
}

// Ready waits for n lines with "ready":true (one per QP) and returns them.
func (p *Proc) Ready(t testing.TB, n int) []Line {
	t.Helper()
	ls, _ := p.WaitN(t, 0, n, 30*time.Second, Match("ready", true))
	return ls
}

// Stop sends SIGTERM, waits up to 10 s (then kills) and returns the exit
// error (nil for exit 0). Safe to call more than once.
func (p *Proc) Stop(t testing.TB) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if !done {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if _, _, err := p.waitN(0, 1, 10*time.Second, func(Line) bool { return false }); err != nil && !p.exited() {
			_ = p.cmd.Process.Kill()
			p.waitExit()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *Proc) exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *Proc) waitExit() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.done {
		p.cond.Wait()
	}
}

// Result is a finished program run.
type Result struct {
	Lines  []Line
	Stderr string
	Code   int // exit status; -1 if it did not exit normally
}

// Run runs a program to completion (at most a minute).
func Run(t testing.TB, name string, args ...string) Result {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	timer := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	r := Result{Stderr: errb.String(), Code: 0}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ls, perr := ParseLines(out.Bytes())
	if perr != nil {
		t.Fatalf("%s %v: %v\nstdout: %s", name, args, perr, out.String())
	}
	r.Lines = ls
	return r
}

// MustRun runs a program that must exit 0 and returns its lines.
func MustRun(t testing.TB, name string, args ...string) []Line {
	t.Helper()
	r := Run(t, name, args...)
	if r.Code != 0 {
		t.Fatalf("%s %v exited %d: %s", name, args, r.Code, r.Stderr)
	}
	return r.Lines
}

// ReadInt reads a sysfs file holding one integer.
func ReadInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// CMRxCounter is /sys/class/infiniband/DEV/ports/PORT/cm_rx_msgs/NAME.
func CMRxCounter(t testing.TB, dev string, port int, name string) int64 {
	t.Helper()
	p := fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/cm_rx_msgs/%s", dev, port, name)
	v, err := ReadInt(p)
	if err != nil {
		t.Fatalf("reading %s: %v", p, err)
	}
	return v
}

// QPN returns the qpn of the ready line for dev (lab-pair, lab-cm-pair).
func QPN(t testing.TB, ready []Line, dev string) int64 {
	t.Helper()
	for _, l := range ready {
		if l.Str("dev") == dev {
			return l.Int("qpn")
		}
	}
	t.Fatalf("no ready line for %s in %v", dev, ready)
	return 0
}

// Inject runs lab-inject, which must succeed.
func Inject(t testing.TB, dev string, qpn int64, event string, migrate bool) Line {
	t.Helper()
	args := []string{"--dev", dev, "--qpn", strconv.FormatInt(qpn, 10), "--event", event}
	if migrate {
		args = append(args, "--migrate")
	}
	ls := MustRun(t, "lab-inject", args...)
	if len(ls) != 1 || ls[0].Int("ret") != 0 {
		t.Fatalf("lab-inject %v: want one line with ret 0, got %v", args, ls)
	}
	return ls[0]
}

// labHooks are the flags that make apmwatch watch the lab module's QP
// event handler (apmlab's qp_event, a kernel ULP's handler that no real host
// has; MODULE:FUNC, so that a reload of apmlab is noticed) on kernels
// without __ib_qp_event_handler (6.1), where nothing else
// sees the kernel ULP's QP events. On 6.12 the core handler sees them, and
// a second hook would report each event twice.
// envCount is the positive count in the environment variable name, or
// def when it is unset; anything else fails the test.
func envCount(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive count", name, s)
	}
	return n
}

// hasKsym says whether the kernel has the function (a module's or its own),
// from /proc/kallsyms: what the kernel inlines or lacks is not there.
func hasKsym(t testing.TB, name string) bool {
	t.Helper()
	ks, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(ks, []byte(" "+name+"\t")) || bytes.Contains(ks, []byte(" "+name+"\n"))
}

// funcMethod is how a function hook in the RDMA modules attaches here:
// fentry where the module has its own BTF, else (5.10, whose image has
// external BTF) a kprobe.
func funcMethod() event.HookMethod {
	if _, err := os.Stat("/sys/kernel/btf/ib_core"); err != nil {
		return event.HookKprobe
	}
	return event.HookFentry
}

func labHooks(t testing.TB) []string {
	t.Helper()
	if hasQPEventHandler(t) {
		return nil
	}
	return []string{"--event-hook", "apmlab:qp_event"}
}

// hasQPEventHandler says whether ib_core has __ib_qp_event_handler (>= 6.11),
// from kallsyms, not from the kernel's version.
func hasQPEventHandler(t testing.TB) bool {
	t.Helper()
	ks, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(ks, []byte(" __ib_qp_event_handler\t"))
}
