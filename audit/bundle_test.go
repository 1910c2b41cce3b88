package audit

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/rdmanl"
	"github.com/apmwatch/apmwatch/recording"
)

// flight writes steps into a rotating flight recorder in dir.
func flight(t *testing.T, dir string, steps []apmtest.Step) []string {
	t.Helper()
	w, err := recording.Create(filepath.Join(dir, flightPrefix+"x"), event.Meta{Host: "h"}, recording.Options{Compress: true, MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if s.Ev != nil {
			w.Write(s.Ev)
		}
	}
	w.Flush() // left open, as the daemon's is: no end record on the last file
	t.Cleanup(func() { w.Close() })
	return w.Files()
}

func TestBundleSliceAndFiles(t *testing.T) {
	dir := t.TempDir()
	b := apmtest.New()
	b.Device = "rxe0"
	for q := uint32(100); q < 300; q++ { // earlier traffic, before the slice
		b.Connect(q, apmtest.PathA, nil)
		b.Destroy(q)
	}
	b.After(time.Minute)
	from := b.Now()
	missedRearm(b)
	files := flight(t, dir, b.Steps)
	if len(files) < 2 {
		t.Fatalf("want rotated files, got %v", files)
	}
	f := apm.Finding{ID: 9, Kind: apm.MissedRearm, Severity: apm.SevError, QP: apm.Key{Device: "rxe0", QPN: 17, Gen: 1}, Last: b.Now()}
	bd := newBundle(dir, time.Now(), findingline.Line{Finding: f}, 0, from)
	bd.lines = []findingline.Line{{Type: findingline.TypeFinding, Finding: f}}
	bd.addQPs(event.QPKey{Device: "rxe0", QPN: 17}, rdmanl.Snapshot{QPs: []rdmanl.QP{{Device: "rxe0", LQPN: 17}, {Device: "rxe0", LQPN: 18}}}, nil)
	bd.files, bd.host = files, "h"
	if err := writeBundle(context.Background(), bd); err != nil {
		t.Fatal(err)
	}
	got := replayBundle(t, filepath.Join(bd.dir, BundleEvents), b.Now()+uint64(3*time.Second))
	if len(got) != 1 || got[0].Kind != apm.MissedRearm || got[0].QP.QPN != 17 {
		t.Fatalf("bundle replays to %+v", got)
	}
	var info BundleInfoFile
	raw, _ := os.ReadFile(filepath.Join(bd.dir, BundleInfo))
	if err := json.Unmarshal(raw, &info); err != nil || info.Schema != BundleSchema || info.Events != 6 || len(info.Findings) != 1 || len(info.Warnings) != 0 {
		t.Fatalf("bundle.json: %+v %v (want the 6 events of the slice only)", info, err)
	}
	var qps BundleQPsFile
	raw, _ = os.ReadFile(filepath.Join(bd.dir, BundleQPs))
	if err := json.Unmarshal(raw, &qps); err != nil || qps.Schema != BundleSchema || len(qps.QPs) != 1 || qps.QPs[0].LQPN != 17 {
		t.Fatalf("qps.json: %+v %v", qps, err)
	}
	if _, err := os.Stat(bd.dir + ".tmp"); !os.IsNotExist(err) {
		t.Fatal("the .tmp directory is left")
	}
	// Bundles name processes and hosts: 0750 and 0640 whatever the umask
	// (022 here, which would leave 0755 and 0644 readable by anyone).
	fi, _ := os.Stat(bd.dir)
	if fi.Mode().Perm() != 0o750 {
		t.Errorf("bundle directory mode %v", fi.Mode().Perm())
	}
	ents, _ := os.ReadDir(bd.dir)
	for _, e := range ents {
		if fi, _ := e.Info(); fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v", e.Name(), fi.Mode().Perm())
		}
	}
}

// Bundles written over and over leave neither goroutines nor heap behind.
func TestBundlesDoNotLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("leak test")
	}
	dir := t.TempDir()
	b := apmtest.New()
	b.Device = "rxe0"
	for q := uint32(100); q < 600; q++ {
		b.Connect(q, apmtest.PathA, nil)
		b.Destroy(q)
	}
	files := flight(t, dir, b.Steps)
	measure := func(n int) (uint64, int) {
		for i := 0; i < n; i++ {
			bd := newBundle(dir, time.Now(), findingline.Line{}, 0, 0)
			bd.dir += "-" + time.Now().Format("150405.000000000")
			bd.files = files
			if err := writeBundle(context.Background(), bd); err != nil {
				t.Fatal(err)
			}
			pruneBundles(dir, 3)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, runtime.NumGoroutine()
	}
	h1, g1 := measure(20)
	h2, g2 := measure(100)
	t.Logf("after 20 bundles: heap %d KiB, %d goroutines; after 120: %d KiB, %d", h1>>10, g1, h2>>10, g2)
	if h2 > h1+1<<20 || g2 > g1 {
		t.Fatalf("bundles leak: heap %d -> %d KiB, goroutines %d -> %d", h1>>10, h2>>10, g1, g2)
	}
}

// One rdma netlink reading serves the findings of a bundle within
// snapshotReuse (a storm brings thousands at once); an older one is read again.
func TestBundleSnapshotReused(t *testing.T) {
	reads := 0
	read := func() (rdmanl.Snapshot, error) {
		reads++
		return rdmanl.Snapshot{QPs: []rdmanl.QP{{Device: "ibsim0", LQPN: uint32(reads)}}}, nil
	}
	var b bundle
	t0 := time.Unix(1000, 0)
	for i := 0; i < 1000; i++ {
		b.snapshot(t0.Add(time.Duration(i)*time.Millisecond/2), read)
	}
	if reads != 1 {
		t.Fatalf("%d readings for 1000 findings within 500ms, want 1", reads)
	}
	if s, _ := b.snapshot(t0.Add(snapshotReuse), read); reads != 2 || s.QPs[0].LQPN != 2 {
		t.Errorf("after snapshotReuse: %d readings, row %+v; want a new reading", reads, s.QPs)
	}
}
