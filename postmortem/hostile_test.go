package postmortem

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/recording/recordingtest"
)

// replayAll runs a postmortem of path and renders it every way.
func replayAll(t testing.TB, path string, o Options) *Report {
	r, err := Run(context.Background(), []string{path}, o)
	if err != nil {
		return nil
	}
	var b bytes.Buffer
	for _, w := range []func(*bytes.Buffer, *Report) error{
		func(b *bytes.Buffer, r *Report) error { return WriteText(b, r) },
		func(b *bytes.Buffer, r *Report) error { return WriteJSON(b, r) },
		func(b *bytes.Buffer, r *Report) error { return WriteHTML(b, r) },
	} {
		b.Reset()
		if err := w(&b, r); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// What a report keeps is bounded whatever the recording holds: QP
// histories (--max-qps), timeline entries, findings, migrations and
// rearms; what is left out is counted.
func TestHostileReplayBounded(t *testing.T) {
	dir := t.TempDir()
	o := Options{Config: apm.DefaultConfig(), MaxEntries: 2000}
	o.Config.MaxQPs = 1000
	for _, f := range recordingtest.Files(2 << 20) {
		path := filepath.Join(dir, f.Name+".rec")
		if err := os.WriteFile(path, f.Data, 0o600); err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		r := replayAll(t, path, o)
		if r == nil {
			continue // refused (header-hooks)
		}
		entries, qps := 0, r.Summary.QPs
		for _, q := range r.QPs {
			entries += len(q.Entries)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t.Logf("%s: %d events, %d QPs, %d entries, %d findings; dropped %d qp events, %d entries, %d findings; heap %d MiB",
			f.Name, r.Summary.Events, qps, entries, len(r.Findings), r.Summary.DroppedQPs, r.Summary.DroppedTimeline,
			r.Summary.DroppedFindings, ms.HeapAlloc>>20)
		if qps > o.Config.MaxQPs || entries > maxTimeline || len(r.Findings) > maxFindings {
			t.Errorf("%s: %d QPs (max %d), %d entries (max %d), %d findings (max %d)", f.Name,
				qps, o.Config.MaxQPs, entries, maxTimeline, len(r.Findings), maxFindings)
		}
		if f.Name == "create-flood" && r.Summary.DroppedQPs == 0 {
			t.Errorf("create-flood: no QP beyond --max-qps counted")
		}
	}
}
