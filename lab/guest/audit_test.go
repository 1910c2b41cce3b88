//go:build labguest

package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/testkit"
	"github.com/apmwatch/apmwatch/recording"
)

// auditMetrics is where the guest tests serve audit's metrics (not the
// default port, so that a test never meets a daemon left running).
const auditMetrics = "127.0.0.1:19578"

// startAudit runs `apmwatch audit` with its outputs in dir and waits until
// the probes are attached.
func startAudit(t *testing.T, dir string, args ...string) *Proc {
	t.Helper()
	ready := filepath.Join(dir, "ready")
	args = append([]string{"audit", "--findings", filepath.Join(dir, "findings.jsonl"),
		"--metrics-addr", auditMetrics, "--recorder-dir", filepath.Join(dir, "rec"),
		"--bundle-after", "1s", "--reconcile-interval", "1s", "--ready-file", ready}, append(args, labHooks(t)...)...)
	p := Start(t, "apmwatch", args...)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("apmwatch audit not ready in 60s\n%s", p.Dump())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// auditLine is a finding log line as a consumer reads it.
type auditLine struct {
	Type   string `json:"type"`
	Bundle string `json:"bundle"`
	ID     uint64 `json:"id"`
	Kind   string `json:"kind"`
	QP     struct {
		Device string `json:"device"`
		QPN    int64  `json:"qpn"`
	} `json:"qp"`
	Last        uint64 `json:"last_boot_ns"`
	Unprotected int64  `json:"unprotected_ns"`
}

func readAuditLines(t *testing.T, path string) []auditLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	// The daemon may be writing the last line as it is read (a reader can
	// see part of a write): the lines read are the whole ones. That the
	// daemon writes whole lines only is audit's own test
	// (TestFindLogDiskFullKeepsWholeLinesInOrder).
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		b = b[:i+1]
	}
	var out []auditLine
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("bad finding line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// waitFinding waits for a finding line of kind on dev/qpn.
func waitFinding(t *testing.T, p *Proc, path, kind, dev string, qpn int64) auditLine {
	t.Helper()
	deadline := time.Now().Add(evTimeout)
	for {
		for _, l := range readAuditLines(t, path) {
			if l.Type == "finding" && l.Kind == kind && l.QP.Device == dev && l.QP.QPN == qpn {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s finding on %s/%d in %s\n%s", kind, dev, qpn, path, p.Dump())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func countFindings(ls []auditLine, kind, dev string, qpn int64) int {
	n := 0
	for _, l := range ls {
		if l.Type == "finding" && l.Kind == kind && l.QP.Device == dev && l.QP.QPN == qpn {
			n++
		}
	}
	return n
}

// scrape returns the metrics page served by audit.
func scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + auditMetrics + "/metrics")
	if err != nil {
		t.Fatalf("scraping metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scraping metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// metricValue finds the sample line "NAME{LABELS} VALUE" and returns VALUE.
func metricValue(page, series string) string {
	for _, l := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return v
		}
	}
	return ""
}

// migrateNoRearm runs lab-pair --behavior never-rearm on dev0/dev1, injects a
// PATH_MIG on dev's QP and returns the pair and the QPN.
func migrateNoRearm(t *testing.T, dev string) (*Proc, int64) {
	t.Helper()
	p, ready := startPair(t, "--behavior", "never-rearm")
	q := QPN(t, ready, dev)
	Inject(t, dev, q, "path_mig", true)
	p.Wait(t, 0, evTimeout, Match("event", "PATH_MIG", "qpn", q, "dev", dev))
	return p, q
}

// The daemon end to end: one missed-rearm line and its metric, an incident
// bundle that replays to the same finding, an RDMA device deleted and added
// again with nothing lost after it, complete files after SIGTERM.
func TestAudit(t *testing.T) {
	dir := t.TempDir()
	findings := filepath.Join(dir, "findings.jsonl")
	a := startAudit(t, dir)

	// One missed-rearm, once, with its metric.
	p, q := migrateNoRearm(t, "rxe0")
	f := waitFinding(t, a, findings, "missed-rearm", "rxe0", q)
	page := scrape(t)
	if v := metricValue(page, `apmwatch_findings_total{kind="missed-rearm",severity="error"}`); v != "1" {
		t.Errorf("apmwatch_findings_total{missed-rearm,error} = %q, want 1", v)
	}
	if v := metricValue(page, `apmwatch_open_findings{kind="missed-rearm"}`); v != "1" {
		t.Errorf("apmwatch_open_findings{missed-rearm} = %q, want 1", v)
	}
	if v := metricValue(page, `apmwatch_migrations_total{device="rxe0",result="ok"}`); v != "1" {
		t.Errorf("apmwatch_migrations_total{rxe0,ok} = %q, want 1", v)
	}
	if v := metricValue(page, `apmwatch_hooks{method="missing"}`); v == "" {
		t.Errorf("no apmwatch_hooks series:\n%s", page)
	}
	for _, s := range []string{"apmwatch_lost_events_total 0", "apmwatch_build_info{", "apmwatch_probes_up 1", "apmwatch_recorder_up 1"} {
		if !strings.Contains(page, s) {
			t.Errorf("metrics lack %q", s)
		}
	}

	// The bundle: plain recording files that replay to the same finding,
	// through the recording API and through apmwatch postmortem.
	bundle := waitBundle(t, a, f.Bundle)
	events := filepath.Join(bundle, "events.rec")
	if got := replayKinds(t, events, f.Last+uint64(time.Second)); countFindings(got, "missed-rearm", "rxe0", q) != 1 {
		t.Errorf("the bundle replays to %+v, want one missed-rearm on rxe0/%d", got, q)
	}
	if out, err := exec.Command("apmwatch", "postmortem", "-o", "json", events).Output(); err != nil {
		t.Errorf("apmwatch postmortem %s: %v", events, err)
	} else if !strings.Contains(string(out), `"missed-rearm"`) {
		t.Errorf("postmortem of the bundle has no missed-rearm:\n%s", out)
	}
	// The rdma netlink readings (--reconcile-interval) come in the stream,
	// so the bundle keeps them for postmortem (mig-state-mismatch,
	// stuck-rearm): the migrated QP read MIGRATED.
	if n := countReadings(t, events, "rxe0", q, event.MigMigrated); n == 0 {
		t.Errorf("the bundle holds no qp-truth reading of rxe0/%d as MIGRATED", q)
	}
	for _, name := range []string{"findings.jsonl", "qps.json", "bundle.json"} {
		if _, err := os.Stat(filepath.Join(bundle, name)); err != nil {
			t.Errorf("bundle: %v", err)
		}
	}
	var qps struct {
		QPs []struct {
			Device string `json:"ifname"`
			LQPN   int64  `json:"lqpn"`
		} `json:"qps"`
	}
	if b, err := os.ReadFile(filepath.Join(bundle, "qps.json")); err == nil {
		json.Unmarshal(b, &qps)
	}
	if len(qps.QPs) != 1 || qps.QPs[0].Device != "rxe0" || qps.QPs[0].LQPN != q {
		t.Errorf("bundle qps.json: %+v, want the row of rxe0/%d", qps, q)
	}
	if err := p.Stop(t); err != nil {
		t.Errorf("lab-pair: %v", err)
	}

	// The device goes away and comes back: what happens after is seen.
	runCmd(t, "rdma", "link", "delete", "rxe1")
	runCmd(t, "rdma", "link", "add", "rxe1", "type", "rxe", "netdev", "veth1")
	p2, q2 := migrateNoRearm(t, "rxe1")
	waitFinding(t, a, findings, "missed-rearm", "rxe1", q2)
	if err := p2.Stop(t); err != nil {
		t.Errorf("lab-pair after re-adding rxe1: %v", err)
	}

	// SIGTERM: exit 0, every file complete.
	if err := a.Stop(t); err != nil {
		t.Fatalf("audit on SIGTERM: %v\n%s", err, a.Dump())
	}
	ls := readAuditLines(t, findings)
	if n := countFindings(ls, "missed-rearm", "rxe0", q); n != 1 {
		t.Errorf("%d missed-rearm lines for rxe0/%d, want exactly 1", n, q)
	}
	flight, _ := filepath.Glob(filepath.Join(dir, "rec", "flight-*"))
	r, err := recording.Open(flight...)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, err := r.Next(context.Background()); err != nil {
			break
		}
		n++
	}
	if w := r.Warnings(); len(w) != 0 || n == 0 {
		t.Errorf("flight recorder after SIGTERM: %d events, warnings %v", n, w)
	}
	r.Close()
	if !strings.Contains(a.Stderr(), "audit stopped") {
		t.Errorf("no closing log line:\n%s", a.Stderr())
	}
}

// Bad input and missing privileges: one line, non-zero exit.
func TestAuditErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"audit", "--reconcile-interval", "1ms", "--findings", "/tmp/x"}, 2, "--reconcile-interval"},
		{[]string{"audit", "--metrics-addr", "nonsense", "--findings", "/tmp/x"}, 2, "--metrics-addr"},
		{[]string{"audit", "--findings", "/tmp/x", "extra"}, 2, "takes no arguments"},
	} {
		cmd := exec.Command("apmwatch", c.args...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != c.code {
			t.Errorf("apmwatch %v: %v, want exit %d", c.args, err, c.code)
		}
		if s := strings.TrimSpace(string(out)); strings.Count(s, "\n") != 0 || !strings.Contains(s, c.want) {
			t.Errorf("apmwatch %v printed %q, want one line with %q", c.args, s, c.want)
		}
	}
}

func waitBundle(t *testing.T, a *Proc, dir string) string {
	t.Helper()
	deadline := time.Now().Add(evTimeout)
	for {
		if fi, err := os.Stat(filepath.Join(dir, "bundle.json")); err == nil && !fi.IsDir() {
			return dir
		}
		if time.Now().After(deadline) {
			t.Fatalf("bundle %q not written\n%s", dir, a.Dump())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// replayKinds runs a recording through a fresh model judged until judge.
func replayKinds(t *testing.T, path string, judge uint64) []auditLine {
	t.Helper()
	var out []auditLine
	for _, f := range testkit.Replay(t, path, apm.DefaultConfig(), judge) {
		if !f.Resolved {
			l := auditLine{Type: "finding", ID: f.ID, Kind: string(f.Kind)}
			l.QP.Device, l.QP.QPN = f.QP.Device, int64(f.QP.QPN)
			out = append(out, l)
		}
	}
	return out
}

// countReadings counts the rdma netlink readings (qp-truth) of dev/qpn
// that read mig in a recording.
func countReadings(t *testing.T, path, dev string, qpn int64, mig event.MigState) int {
	t.Helper()
	r, err := recording.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for {
		e, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == event.KindTruth && e.Truth != nil && e.Truth.Op == event.TruthRead &&
			e.Device == dev && int64(e.QPN) == qpn && e.Truth.Mig == mig {
			n++
		}
	}
}

// runCmd runs a command that prints no JSON and must exit 0.
func runCmd(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}

// ib modules unloaded and loaded again while audit runs: the probes are
// re-attached (kprobes here: they do not pin their module, fentry does) and
// what happens afterwards is seen.
func TestAuditModuleReload(t *testing.T) {
	dir := t.TempDir()
	findings := filepath.Join(dir, "findings.jsonl")
	// apmlab holds the only hook that lives in a module the lab may unload.
	a := startAudit(t, dir, "--force-kprobe", "--event-hook", "apmlab:qp_event")
	t.Cleanup(func() { // a failure half-way must not leave the lab without its module
		if _, err := os.Stat("/sys/kernel/debug/apmlab/inject"); err != nil {
			_ = exec.Command("insmod", "/lib/lab-kmod/apmlab.ko").Run()
		}
	})
	waitLog := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(evTimeout)
		for strings.Count(a.Stderr(), what) < n {
			if time.Now().After(deadline) {
				t.Fatalf("audit did not log %q\n%s", what, a.Dump())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	attached := `msg="probes attached" reason=modules`
	runCmd(t, "rmmod", "apmlab")
	waitLog(`why="apmlab unloaded"`, 1)
	waitLog(attached, 1)
	runCmd(t, "insmod", "/lib/lab-kmod/apmlab.ko")
	waitLog(`why="apmlab loaded"`, 1)
	waitLog(attached, 2)
	if v := metricValue(scrape(t), `apmwatch_probe_reattach_total{reason="modules"}`); v != "2" {
		t.Errorf("apmwatch_probe_reattach_total{modules} = %q, want 2", v)
	}
	p, q := migrateNoRearm(t, "rxe0")
	waitFinding(t, a, findings, "missed-rearm", "rxe0", q)
	p.Stop(t)
	if err := a.Stop(t); err != nil {
		t.Errorf("audit on SIGTERM: %v\n%s", err, a.Dump())
	}
}
