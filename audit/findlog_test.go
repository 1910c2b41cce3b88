package audit

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fullFile takes room bytes, then fails with ENOSPC (after a short write,
// as a real file does).
type fullFile struct {
	buf  bytes.Buffer
	room int
}

func (f *fullFile) Write(b []byte) (int, error) {
	if len(b) <= f.room {
		f.room -= len(b)
		return f.buf.Write(b)
	}
	n := f.room
	f.buf.Write(b[:n])
	f.room = 0
	return n, syscall.ENOSPC
}

func (f *fullFile) Close() error { return nil }

func testLine(id uint64, kind apm.Kind) findingline.Line {
	return findingline.Line{Type: findingline.TypeFinding, Host: "h", Finding: apm.Finding{ID: id, Kind: kind, Severity: apm.SevError,
		QP: apm.Key{Device: "rxe0", QPN: 17, Gen: 1}, Explanation: strings.Repeat("x", 50)}}
}

func TestFindLogDiskFullKeepsWholeLinesInOrder(t *testing.T) {
	f := &fullFile{room: 300}
	m := newMetrics()
	var warnings []string
	l, err := newFindLog("findings.jsonl", func(string) (io.WriteCloser, error) { return f, nil }, nil, m,
		func(msg string, _ ...any) { warnings = append(warnings, msg) })
	if err != nil {
		t.Fatal(err)
	}
	frees := 0
	l.freeSpace = func() bool { frees++; return false }
	for id := uint64(1); id <= 5; id++ {
		l.write(testLine(id, apm.MissedRearm))
	}
	if frees == 0 {
		t.Fatal("a full disk did not ask for room (the recorder goes first)")
	}
	if got := testutil.ToFloat64(m.findingsPending); got == 0 {
		t.Fatal("findings_pending is 0 while lines wait")
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "disk full") {
		t.Fatalf("want one disk-full warning, got %q", warnings)
	}
	f.room = 1 << 20 // room again
	l.flush()
	if got := testutil.ToFloat64(m.findingsPending); got != 0 {
		t.Fatalf("findings_pending %v after room came back", got)
	}
	lines := strings.Split(strings.TrimSuffix(f.buf.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("want 5 lines, got %d:\n%s", len(lines), f.buf.String())
	}
	for i, s := range lines {
		var got lineJSON
		if err := json.Unmarshal([]byte(s), &got); err != nil {
			t.Fatalf("line %d is not whole JSON: %v: %q", i, err, s)
		}
		if got.ID != uint64(i+1) || got.Kind != string(apm.MissedRearm) || got.Severity != "error" || got.QP.QPN != 17 || got.Type != findingline.TypeFinding {
			t.Fatalf("line %d: %+v", i, got)
		}
	}
}

func TestFindLogDropsOldestBeyondBound(t *testing.T) {
	f := &fullFile{}
	m := newMetrics()
	l, _ := newFindLog("f", func(string) (io.WriteCloser, error) { return f, nil }, nil, m, func(string, ...any) {})
	for id := uint64(1); id <= maxPending+3; id++ {
		l.write(testLine(id, apm.LAPRace))
	}
	if got := testutil.ToFloat64(m.findingsDropped); got != 3 {
		t.Fatalf("findings_dropped_total %v, want 3", got)
	}
	if len(l.pending) != maxPending {
		t.Fatalf("%d lines pending, want %d", len(l.pending), maxPending)
	}
}

func TestFindLogStdoutAndReopen(t *testing.T) {
	var out bytes.Buffer
	var files []*fullFile
	open := func(string) (io.WriteCloser, error) {
		f := &fullFile{room: 1 << 20}
		files = append(files, f)
		return f, nil
	}
	l, _ := newFindLog("f", open, &out, newMetrics(), func(string, ...any) {})
	l.write(testLine(1, apm.MissedRearm))
	if err := l.reopen(); err != nil {
		t.Fatal(err)
	}
	l.write(testLine(2, apm.MissedRearm))
	if len(files) != 2 || strings.Count(files[0].buf.String(), "\n") != 1 || strings.Count(files[1].buf.String(), "\n") != 1 {
		t.Fatalf("reopen did not move the log to a new file: %d files", len(files))
	}
	if strings.Count(out.String(), "\n") != 2 {
		t.Fatalf("stdout got %q", out.String())
	}
}
