//go:build labguest

// apmwatch hca-check on the simulated InfiniBand HCA: under each profile
// and knob setting of ibsim it must report exactly the knobs that were set,
// leave no QP behind, and refuse devices that are not InfiniBand. These
// tests need root inside the lab guest (make lab-test).
package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// labKnobs reads `lab-ib knob`: one "NAME VALUE" line per knob (not JSON),
// the behaviours hca-check answers.
func labKnobs(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("lab-ib", "knob").Output()
	if err != nil {
		t.Fatalf("lab-ib knob: %v", err)
	}
	m := map[string]string{}
	s := bufio.NewScanner(bytes.NewReader(out))
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) != 2 {
			t.Fatalf("lab-ib knob: line %q is not NAME VALUE", s.Text())
		}
		m[f[0]] = f[1]
	}
	// pm-latency is a firmware timing, not a behaviour: hca-check answers
	// the behaviours, and a rearm's time shows in its trace.
	if m["pm-latency"] == "" || len(m) != 6 {
		t.Fatalf("lab-ib knob lists %v, want the six knobs", m)
	}
	delete(m, "pm-latency")
	return m
}

// ibQPList is every QP lab-ib show lists, "dev/qpn", sorted.
func ibQPList(t *testing.T) []string {
	t.Helper()
	var qps []string
	for _, l := range ibShow(t) {
		if l.Has("qpn") {
			qps = append(qps, fmt.Sprintf("%s/%s", l.Str("dev"), l.Str("qpn")))
		}
	}
	slices.Sort(qps)
	return qps
}

// hcaReport is apmwatch hca-check -o json.
type hcaReport struct {
	Device  string            `json:"device"`
	Port    int               `json:"port"`
	AltPort int               `json:"alt_port"`
	QPN     map[string]uint32 `json:"qpn"`
	Points  []struct {
		Point, Answer, Errno, Event, Detail string
	} `json:"points"`
	Knobs map[string]string `json:"knobs"`
	Notes []string          `json:"notes"`
}

// runHCACheck runs apmwatch hca-check with args (at most two minutes) and
// returns its stdout, stderr and exit code.
func runHCACheck(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "apmwatch", append([]string{"hca-check"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("apmwatch hca-check %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// checkNoQPLeft fails if the QP list changed across a run or still names
// one of the run's QPs.
func checkNoQPLeft(t *testing.T, before []string, rep *hcaReport) {
	t.Helper()
	after := ibQPList(t)
	if !slices.Equal(before, after) {
		t.Errorf("lab-ib show QPs changed across hca-check:\nbefore %v\nafter  %v", before, after)
	}
	if rep == nil {
		return
	}
	for name, q := range rep.QPN {
		if slices.Contains(after, fmt.Sprintf("%s/%d", rep.Device, q)) {
			t.Errorf("hca-check's QP %s (%d) is still there", name, q)
		}
	}
}

// For each profile and a few mixed settings, hca-check's knobs are exactly
// the ones set in the driver.
func TestHCACheckReportsTheKnobs(t *testing.T) {
	t.Cleanup(func() { Run(t, "lab-ib", "profile", "ibta") })
	for _, c := range []struct {
		name, profile string
		set           [][2]string
	}{
		{"ibta", "ibta", nil},
		{"mlx5", "mlx5", nil},
		{"ibta-forced-after", "ibta", [][2]string{{"forced-event", "after"}}},
		{"mlx5-forced-after-alt-copy", "mlx5", [][2]string{{"forced-event", "after"}, {"alt-after-migration", "copy"}}},
		{"ibta-accept-pathmig-err", "ibta", [][2]string{{"armed-modify", "accept"}, {"dead-alternate", "pathmig-err"}}},
		{"mlx5-refuse-inside-retry", "mlx5", [][2]string{{"armed-modify", "refuse"}, {"forced-event", "inside"}, {"dead-alternate", "retry"}}},
		{"ibta-forced-none-alt-zero", "ibta", [][2]string{{"forced-event", "none"}, {"alt-after-migration", "zero"}}},
		{"ibta-unloaded-alt-port-1", "ibta", [][2]string{{"unloaded-alt-port", "1"}}},
		{"mlx5-unloaded-alt-port-1", "mlx5", [][2]string{{"unloaded-alt-port", "1"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			MustRun(t, "lab-ib", "profile", c.profile)
			for _, kv := range c.set {
				MustRun(t, "lab-ib", "knob", kv[0], kv[1])
			}
			want := labKnobs(t)
			for _, kv := range c.set {
				if want[kv[0]] != kv[1] {
					t.Fatalf("lab-ib knob says %s=%s after setting %s", kv[0], want[kv[0]], kv[1])
				}
			}
			before := ibQPList(t)
			out, errs, code := runHCACheck(t, "--dev", "ibsim0", "--port", "1", "--alt-port", "2", "-o", "json")
			if code != 0 {
				t.Fatalf("hca-check exited %d: %s\n%s", code, errs, out)
			}
			var rep hcaReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("hca-check -o json: %v\n%s", err, out)
			}
			if !maps.Equal(rep.Knobs, want) {
				t.Errorf("hca-check knobs %v, set %v\n%s", rep.Knobs, want, out)
			}
			if rep.Device != "ibsim0" || rep.Port != 1 || rep.AltPort != 2 || len(rep.Points) != 10 || len(rep.QPN) != 2 {
				t.Errorf("report %s", out)
			}
			// What no knob covers comes out as rdmavt (and ibsim) answer it.
			for _, p := range rep.Points {
				w, ok := map[string]string{"rearm-on-armed": "refuse", "migrated-from-rearm": "refuse",
					"responder-event": "raised", "comm-est-after-migration": "none", "one-way-arm": "both"}[p.Point]
				if ok && p.Answer != w {
					t.Errorf("%s: %s, want %s (%s)", p.Point, p.Answer, w, p.Detail)
				}
			}
			checkNoQPLeft(t, before, &rep)
		})
	}
}

// With an LMC (lab-ib lmc 1: ibsim0 port 1 answers LIDs 2 and 3) and the
// alternate on the same port, hca-check loads the port's LMC path (DLID
// LID+1, source path bits 1), which ibsim routes on its own: the
// alternate after a migration tells a copy from a swap, and the knobs come
// back as set.
func TestHCACheckLMCPath(t *testing.T) {
	MustRun(t, "lab-ib", "lmc", "1")
	t.Cleanup(func() { Run(t, "lab-ib", "lmc", "0") })
	port := Filter(ibShow(t), and(Match("dev", "ibsim0", "port", 1), func(l Line) bool { return l.Has("lid") }))
	if len(port) != 1 || port[0].Int("lid") != 2 || port[0].Int("lmc") != 1 {
		t.Fatalf("lab-ib show after lmc 1: %v, want ibsim0 port 1 with LID 2, LMC 1", port)
	}
	want := labKnobs(t)
	before := ibQPList(t)
	out, errs, code := runHCACheck(t, "--dev", "ibsim0", "--port", "1", "--alt-port", "1", "-o", "json")
	if code != 0 {
		t.Fatalf("hca-check exited %d: %s\n%s", code, errs, out)
	}
	var rep hcaReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("hca-check -o json: %v\n%s", err, out)
	}
	if !maps.Equal(rep.Knobs, want) || rep.Knobs["alt-after-migration"] != "copy" {
		t.Errorf("hca-check knobs %v, set %v (alt-after-migration must be told)\n%s", rep.Knobs, want, out)
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "the LMC path of port 1 (DLID 3, source path bits 1)") {
		t.Errorf("notes %q, want the LMC path named", rep.Notes)
	}
	checkNoQPLeft(t, before, &rep)
}

// The table output runs the same check (profile ibta) and ends with the
// knob line.
func TestHCACheckTable(t *testing.T) {
	t.Cleanup(func() { Run(t, "lab-ib", "profile", "ibta") })
	MustRun(t, "lab-ib", "profile", "ibta")
	before := ibQPList(t)
	out, errs, code := runHCACheck(t, "--dev", "ibsim0")
	if code != 0 {
		t.Fatalf("hca-check exited %d: %s\n%s", code, errs, out)
	}
	if !strings.Contains(out, "lab knobs: alt-after-migration=copy armed-modify=refuse dead-alternate=retry forced-event=inside") {
		t.Errorf("table output:\n%s", out)
	}
	checkNoQPLeft(t, before, nil)
}

// A device without an InfiniBand link layer, and one that does not exist,
// are refused with one line on stderr, exit 1, nothing on stdout and no QP
// made.
func TestHCACheckRefuses(t *testing.T) {
	for _, c := range []struct{ dev, want string }{
		{"rxe0", "rxe0 port 1 has link layer Ethernet, not InfiniBand"},
		{"nosuch0", "no RDMA device named nosuch0"},
	} {
		t.Run(c.dev, func(t *testing.T) {
			before := ibQPList(t)
			out, errs, code := runHCACheck(t, "--dev", c.dev, "-o", "json")
			if code != 1 || out != "" || strings.Count(errs, "\n") != 1 ||
				!strings.HasPrefix(errs, "apmwatch: ") || !strings.Contains(errs, c.want) {
				t.Errorf("--dev %s: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", c.dev, code, out, errs, c.want)
			}
			checkNoQPLeft(t, before, nil)
		})
	}
}
