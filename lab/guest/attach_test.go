//go:build labguest

// The time from exec of `apmwatch trace` to its ready file (every probe
// attached), and that the hooks come up the same however they are loaded.
package guest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// TestAttachTime starts `apmwatch trace` APMWATCH_ATTACH_RUNS times (2 in
// make test, which checks the hooks; measurements pass 7 or 9) for each
// binary in APMWATCH_ATTACH_BINS (comma-separated, default
// "apmwatch"; another build copied in with LAB_EXTRA compares side by
// side), alternating between them, and logs the median and range per
// binary. Every run of a binary must attach the same hooks with the same
// methods as its first run (builds may differ in their hooks), with the
// lab's QP event hook attached.
func TestAttachTime(t *testing.T) {
	bins := []string{"apmwatch"}
	if s := os.Getenv("APMWATCH_ATTACH_BINS"); s != "" {
		bins = strings.Split(s, ",")
	}
	runs := envCount(t, "APMWATCH_ATTACH_RUNS", 2)
	user, _ := qpEventHooks(t)
	want := map[string][]event.Hook{}
	times := map[string][]time.Duration{}
	for i := 0; i < runs; i++ {
		for _, bin := range bins {
			d, hooks := attachOnce(t, bin)
			times[bin] = append(times[bin], d)
			if want[bin] == nil {
				want[bin] = hooks
				if m := methodOf(hooks, user); m != funcMethod() {
					t.Fatalf("%s: %s attached as %q, want %s: %+v", bin, user, m, funcMethod(), hooks)
				}
				continue
			}
			if !slices.Equal(hooks, want[bin]) {
				t.Errorf("%s run %d: hooks differ\n got %+v\nwant %+v", bin, i, hooks, want[bin])
			}
		}
	}
	for _, bin := range bins {
		s := slices.Clone(times[bin])
		slices.Sort(s)
		t.Logf("attach (exec to ready file) %s: median %v, min %v, max %v, runs %v",
			bin, s[len(s)/2].Round(time.Millisecond), s[0].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), times[bin])
	}
}

func attachOnce(t *testing.T, bin string) (time.Duration, []event.Hook) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(bin, append([]string{"trace", "--output", "json", "--ready-file", ready}, labHooks(t)...)...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	for deadline := start.Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(ready)
		if err == nil && len(b) > 0 {
			d := time.Since(start)
			var m event.Meta
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("%s: ready file: %v: %s", bin, err, b)
			}
			return d, m.Hooks
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s trace not ready in 60s", bin)
		}
	}
}

func methodOf(hooks []event.Hook, name string) event.HookMethod {
	for _, h := range hooks {
		if h.Name == name {
			return h.Method
		}
	}
	return ""
}
