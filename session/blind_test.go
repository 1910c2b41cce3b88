package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// blindSource is a source whose modify hook is in the kernel but failed to
// attach.
type blindSource struct{ fakeSource }

func (b *blindSource) Meta() event.Meta {
	return event.Meta{Host: "h1", Kernel: "6.12", Hooks: []event.Hook{
		{Name: "ib_modify_qp_with_udata", Method: event.HookMissing, Failed: true, Carries: "qp modify, user QPs",
			Reason: "fentry failed: no BTF for ib_core; kprobe failed: invalid func unknown#173"},
		{Name: "__ib_qp_event_handler", Method: event.HookFentry, Carries: "qp async events"},
	}}
}

// trace and record refuse a blind source with one line naming the hook and
// why, and leave no recording behind that claims to have seen the host.
func TestBlindIsError(t *testing.T) {
	check := func(t *testing.T, err error, src *blindSource) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "ib_modify_qp_with_udata") || !strings.Contains(err.Error(), "invalid func") ||
			strings.Contains(err.Error(), "\n") {
			t.Fatalf("error %v: want one line naming the hook and why", err)
		}
		if !src.closed {
			t.Error("the blind source was left attached")
		}
	}
	t.Run("trace", func(t *testing.T) {
		src := &blindSource{}
		err := RunTrace(context.Background(), TraceConfig{Output: "json", Duration: 20 * time.Millisecond, NoFindings: true},
			TraceDeps{Open: func() (event.Source, error) { return src, nil }, Stdout: &strings.Builder{}, Stderr: &strings.Builder{}})
		check(t, err, src)
	})
	t.Run("record", func(t *testing.T) {
		src := &blindSource{}
		path := filepath.Join(t.TempDir(), "a.rec")
		_, err := Record(context.Background(), Config{Path: path, Duration: 20 * time.Millisecond},
			Deps{Open: func() (event.Source, error) { return src, nil }})
		check(t, err, src)
		if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("a recording was written from a blind source: %v", serr)
		}
	})
	t.Run("healthy", func(t *testing.T) {
		err := RunTrace(context.Background(), TraceConfig{Output: "json", Duration: 20 * time.Millisecond, NoFindings: true},
			TraceDeps{Open: func() (event.Source, error) { return newFake(1, 0), nil }, Stdout: &strings.Builder{}, Stderr: &strings.Builder{}})
		if err != nil {
			t.Fatal(err)
		}
	})
}
