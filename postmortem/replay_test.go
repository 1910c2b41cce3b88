package postmortem

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
)

// Deadlines are judged up to when the recording stopped (the file's last
// write), not beyond, and not only up to the last event.
func TestDeadlinesJudgedUntilRecordingEnds(t *testing.T) {
	for _, c := range []struct {
		end  float64 // seconds of Boot when the file was last written
		want int     // missed-rearm findings
	}{
		{2.5, 0}, // stopped 0.5 s after the migration: cannot tell
		{9, 1},   // quiet for 7 s after it: the 2 s deadline passed unseen
	} {
		b := newHost(0)
		connect(b, 7, 8, 1)
		b.After(time.Second).PathMig(7) // at Boot 2 s; the last event
		r := run(t, Options{}, write(t, t.TempDir(), "x.rec", "h", b, uint64(c.end*float64(time.Second))))
		if got := r.Summary.Findings["missed-rearm"]; got != c.want {
			t.Errorf("recording ending at %vs: %d missed-rearm, want %d", c.end, got, c.want)
		}
	}
}

func TestProgressBar(t *testing.T) {
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 0
	var buf bytes.Buffer
	s := &stream{label: "host-a", size: 1000}
	p := newProgress(&buf, []*stream{s})
	p.tick(s, 500)
	p.done()
	out := buf.String()
	if !strings.Contains(out, "replaying host-a") || !strings.Contains(out, " 50% ") || !strings.HasSuffix(out, "\r\033[K") {
		t.Fatalf("progress output %q", out)
	}
	var none *progress
	none.tick(s, 0) // no terminal: nothing, no panic
	q := newProgress(nil, nil)
	q.tick(s, 0)
	if q.drawn {
		t.Fatal("drew without a writer")
	}
}

// The bar measures the bytes read out of the files given, not their
// times: a recording copied without its times (here stamped years before
// its events) shows a bar that grows to 100%.
func TestProgressOfACopiedRecording(t *testing.T) {
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 0
	b := newHost(0)
	for q := uint32(1); q <= 400; q++ {
		connect(b, q, q+1000, 1)
		b.After(time.Millisecond).PathMig(q)
		b.After(time.Millisecond).Rearm(q)
	}
	dir := t.TempDir()
	orig := write(t, dir, "orig.rec", "h", b, uint64(time.Hour))
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "copy.rec")
	if err := os.WriteFile(cp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(cp, old, old); err != nil {
		t.Fatal(err)
	}
	var bar bytes.Buffer
	if _, err := Run(context.Background(), []string{cp}, Options{Progress: &bar}); err != nil {
		t.Fatal(err)
	}
	var pcts []int
	for _, m := range regexp.MustCompile(`replaying h +\[[= ]{30}\] +(\d+)% `).FindAllStringSubmatch(bar.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		pcts = append(pcts, n)
	}
	if len(pcts) < 3 || pcts[0] >= 100 || pcts[len(pcts)-1] != 100 {
		t.Fatalf("progress %v, want it to grow to 100%%:\n%q", pcts, bar.String())
	}
	for i := 1; i < len(pcts); i++ {
		if pcts[i] < pcts[i-1] {
			t.Fatalf("progress went back: %v", pcts)
		}
	}
}

// Ground-truth readings recorded in the stream (qp-truth) are replayed
// like the live trace applied them: a PATH_MIG after which the QP still
// reads REARM is a mig-state-mismatch; the readings join the QP's
// timeline (a repeat of the entry before it counted there), and a QP no
// event named is not shown by default (only read: no APM activity).
func TestReplayedTruth(t *testing.T) {
	b := newHost(0)
	connect(b, 7, 8, 1)
	b.After(time.Second).PathMig(7)
	read := func(qpn uint32, mig event.MigState) {
		b.After(300 * time.Millisecond).Add(&event.Event{Kind: event.KindTruth, Seq: 0, QPN: qpn,
			Truth: &event.Truth{Op: event.TruthRead, Source: "netlink", QPType: event.QPTypeRC, State: event.StateRTS, HasState: true, Mig: mig}})
	}
	read(7, event.MigRearm)
	read(7, event.MigRearm)
	read(99, event.MigArmed)
	b.After(100 * time.Millisecond).Rearm(7)
	r := run(t, Options{}, write(t, t.TempDir(), "x.rec", "h", b, uint64(4*time.Second)))
	if r.Summary.Findings["mig-state-mismatch"] != 1 {
		t.Errorf("findings %v: want the mig-state-mismatch the readings prove", r.Summary.Findings)
	}
	if len(r.QPs) != 1 {
		t.Fatalf("%d QP timelines, want 1 (QP 99 was only read)", len(r.QPs))
	}
	n := 0
	for _, e := range r.QPs[0].Entries {
		if e.Kind == "qp-truth" {
			n++
			if e.What != "truth: RTS REARM (no span)" || e.Repeats != 1 {
				t.Errorf("reading entry %+v", e)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d reading entries, want 1 (the second reading did not change)", n)
	}
}

// Every reading in a recording is on the timeline: one after an event
// even when it reads as the one before the event, a reading of a QP no
// event named (shown with --all), a reading without a span (an older
// recorder), marked so.
func TestReadingsAlwaysShown(t *testing.T) {
	b := newHost(0)
	connect(b, 7, 8, 1)
	read := func(qpn uint32, mig event.MigState, span uint64) {
		b.After(300 * time.Millisecond).Add(&event.Event{Kind: event.KindTruth, Seq: 0, QPN: qpn,
			Truth: &event.Truth{Op: event.TruthRead, Source: "netlink", QPType: event.QPTypeRC, State: event.StateRTS, HasState: true, Mig: mig, Span: span}})
	}
	ms := uint64(time.Millisecond)
	read(7, event.MigArmed, ms)
	b.After(time.Second).PathMig(7)
	b.After(10 * time.Millisecond).Add(&event.Event{Kind: event.KindModifyEntry, QPN: 7, Modify: &event.Modify{QPType: event.QPTypeRC,
		AttrMask: event.AttrPathMigState, MigState: event.MigRearm}})
	read(7, event.MigArmed, ms) // the call's result: after the PATH_MIG, alike the reading before it
	read(7, event.MigArmed, 0)  // an older recorder's
	read(99, event.MigArmed, ms)
	r := run(t, Options{All: true}, write(t, t.TempDir(), "x.rec", "h", b, uint64(4*time.Second)))
	got := map[uint32][]string{}
	for _, q := range r.QPs {
		for _, e := range q.Entries {
			if e.Kind == "qp-truth" {
				got[q.QPN] = append(got[q.QPN], e.What)
			}
		}
	}
	want := []string{"truth: RTS ARMED", "truth: RTS ARMED", "truth: RTS ARMED (no span)"}
	if !slices.Equal(got[7], want) {
		t.Errorf("QP 7's readings on its timeline %q, want %q", got[7], want)
	}
	if len(got[99]) != 1 {
		t.Errorf("QP 99 (only read) has readings %q on its timeline, want its one", got[99])
	}
	if len(r.Summary.Findings) != 0 {
		t.Errorf("findings %v: the reading is the rearm call's result", r.Summary.Findings)
	}
}
