package audit

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A source blind to an APM signal is no healthy status: the probes are not
// up, the failed hook shows in the per-hook gauge, and the daemon keeps
// re-attaching (every blindRetry) until the probes see again.
func TestBlindProbesNotUp(t *testing.T) {
	var opens atomic.Int32
	var clock atomic.Int64 // seconds past the start
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := newHarnessWith(t, func(c *Config) { c.ModuleCheck = time.Millisecond }, 5*time.Millisecond, func(h *harness, dp *Deps) {
		dp.Now = func() time.Time { return start.Add(time.Duration(clock.Load()) * time.Second) }
		dp.Open = func() (event.Source, error) {
			src := newFakeSource("hostA")
			if opens.Add(1) == 1 { // the first attach fails on the user modify hook
				src.meta.Hooks = append(src.meta.Hooks, event.Hook{Name: "ib_modify_qp_with_udata", Module: "ib_core",
					Method: event.HookMissing, Failed: true, Reason: "kprobe failed: invalid func unknown#173", Carries: "qp modify, user QPs"})
			} else {
				src.meta.Hooks = append(src.meta.Hooks, event.Hook{Name: "ib_modify_qp_with_udata", Module: "ib_core",
					Method: event.HookKprobe, Carries: "qp modify, user QPs"})
			}
			return src, nil
		}
	})
	d := h.daemon()
	if up := testutil.ToFloat64(d.m.sourceUp); up != 0 {
		t.Fatalf("probes_up %v on a blind source", up)
	}
	if v := testutil.ToFloat64(d.m.hookAttached.WithLabelValues("ib_modify_qp_with_udata", "ib_core", "qp modify, user QPs", "true")); v != 0 {
		t.Errorf("hook_attached of the failed hook %v", v)
	}
	if v := testutil.ToFloat64(d.m.hookAttached.WithLabelValues("ib_modify_qp", "ib_core", "", "false")); v != 1 {
		t.Errorf("hook_attached of an attached hook %v", v)
	}
	time.Sleep(50 * time.Millisecond)
	if n := opens.Load(); n != 1 {
		t.Fatalf("re-attached %d times before blindRetry passed", n-1)
	}
	clock.Store(int64(blindRetry/time.Second) + 1)
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(d.m.sourceUp) != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if up := testutil.ToFloat64(d.m.sourceUp); up != 1 || opens.Load() != 2 {
		t.Errorf("after blindRetry: probes_up %v after %d attaches, want 1 after 2", up, opens.Load())
	}
	if v := testutil.ToFloat64(d.m.hookAttached.WithLabelValues("ib_modify_qp_with_udata", "ib_core", "qp modify, user QPs", "false")); v != 1 {
		t.Errorf("hook_attached after the re-attach %v", v)
	}
	h.stop()
	if log := h.stderr.String(); !strings.Contains(log, "probes attached blind") || !strings.Contains(log, "invalid func") {
		t.Errorf("the log does not say the probes were blind and why:\n%s", log)
	}
}
