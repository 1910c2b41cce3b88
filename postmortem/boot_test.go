package postmortem

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/recording"
)

// writeRun writes one writer run (session) of host with boot id boot.
func writeRun(t *testing.T, path, host, boot string, b *apmtest.Builder) {
	t.Helper()
	meta := event.Meta{Host: host, Kernel: "6.12.0-test", BootOffset: time.Duration(b.Start.UnixNano()), BootID: boot}
	w, err := recording.Create(path, meta, recording.Options{FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range b.Steps {
		if err := w.Write(s.Ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// Two recordings of one boot of one host given together (the flight
// recorder and an operator's record) give each finding once; two boots
// (another boot id) are two hosts' worth of findings, even with the same
// stamps.
func TestFindingOncePerBoot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		boot2 string
		want  int
	}{
		{"the same boot id: once", "boot-1", 1},
		{"another boot id: once per boot", "boot-2", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var paths []string
			for i, boot := range []string{"boot-1", tc.boot2} {
				b := newHost(0)
				connect(b, 17, 18, 0x21)
				b.After(time.Second).PathMig(17) // never rearmed
				b.After(10 * time.Second).Create(99)
				p := filepath.Join(dir, fmt.Sprintf("run%d.rec", i))
				writeRun(t, p, "h", boot, b)
				paths = append(paths, p)
			}
			r := run(t, Options{}, paths...)
			if n := r.Summary.Findings["missed-rearm"]; n != tc.want || len(r.Findings) != tc.want {
				t.Fatalf("%d missed-rearm (%d listed), want %d", n, len(r.Findings), tc.want)
			}
		})
	}
}
