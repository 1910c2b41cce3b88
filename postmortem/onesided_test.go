package postmortem

import (
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// at moves b's clock to Boot d (never back).
func at(b *apmtest.Builder, d time.Duration) *apmtest.Builder {
	if n := uint64(d); n > b.Now() {
		b.After(time.Duration(n - b.Now()))
	}
	return b
}

// A pair a (QP 100, host-a) <-> b (QP 200, host-b) whose ports' LIDs the
// CM MADs prove; a migrates at 2 s and rearms. What b's recording holds
// decides the verdict about b.
func TestOneSidedRearmPeerEvidence(t *testing.T) {
	sec := uint64(time.Second)
	for _, tc := range []struct {
		name     string
		peer     func(b *apmtest.Builder)
		stats    []event.Stats
		want     int
		severity apm.Severity
		verdict  string
	}{
		{name: "the peer migrates with it and never rearms: one-sided",
			peer: func(b *apmtest.Builder) { b.PathMig(200) },
			want: 1, severity: apm.SevError, verdict: "one-sided:"},
		{name: "the peer rearms in time: none",
			peer:    func(b *apmtest.Builder) { b.PathMig(200); b.After(time.Second).Rearm(200) },
			verdict: "both rearmed"},
		{name: "the peer's PATH_MIG is delivered 3 s late and it rearms 500 ms after it: judged from its own migration, none",
			peer: func(b *apmtest.Builder) {
				b.After(3 * time.Second).PathMig(200)
				b.After(500 * time.Millisecond).Rearm(200)
			},
			verdict: "both rearmed"},
		{name: "the peer's PATH_MIG is delivered 3 s late and it never rearms: one-sided",
			peer: func(b *apmtest.Builder) { b.After(3 * time.Second).PathMig(200) },
			want: 1, severity: apm.SevError, verdict: "one-sided:"},
		{name: "the peer's reading turns ARMED within the window, its rearm unseen: none",
			peer: func(b *apmtest.Builder) {
				b.PathMig(200)
				b.After(time.Second/2).Truth(200, event.MigMigrated, event.StateRTS)
				b.After(time.Second/2).Truth(200, event.MigArmed, event.StateRTS)
			},
			verdict: "both rearmed (host-b"},
		{name: "the peer reads ARMED straight after its PATH_MIG (it may never have migrated): one-sided",
			peer: func(b *apmtest.Builder) {
				b.PathMig(200)
				b.After(time.Second).Truth(200, event.MigArmed, event.StateRTS)
			},
			want: 1, severity: apm.SevError, verdict: "one-sided:"},
		{name: "events lost in the peer's window: unconfirmed, a warning naming the loss",
			peer:  func(b *apmtest.Builder) { b.PathMig(200); b.After(3 * time.Second).CommEst(200) },
			stats: []event.Stats{{Lost: 1, At: 2 * sec}, {Lost: 4, At: 3 * sec}},
			want:  1, severity: apm.SevWarning, verdict: "unconfirmed one-sided:"},
		{name: "events lost before the window: one-sided",
			peer:  func(b *apmtest.Builder) { b.PathMig(200); b.After(3 * time.Second).CommEst(200) },
			stats: []event.Stats{{Lost: 4, At: sec + sec/2}, {Lost: 4, At: 3 * sec}},
			want:  1, severity: apm.SevError, verdict: "one-sided:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newHost(0), newHost(0)
			connect(a, 100, 200, 0x21)
			connect(b, 200, 100, 0x11)
			ownLIDs(a, 0x11, 0x12)
			ownLIDs(b, 0x21, 0x22)
			at(a, 2*time.Second).PathMig(100)
			a.After(time.Millisecond).Rearm(100)
			at(b, 2*time.Second)
			tc.peer(b)
			dir := t.TempDir()
			pa := write(t, dir, "a.rec", "host-a", a, 10*sec)
			pb := writeStats(t, dir, "b.rec", "host-b", b, 10*sec, tc.stats...)
			r := run(t, Options{}, pa, pb)
			if len(r.Pairs) != 1 || len(r.Pairs[0].Episodes) != 1 {
				t.Fatalf("pairs %+v unpaired %+v", r.Pairs, r.Unpaired)
			}
			if v := r.Pairs[0].Episodes[0].Verdict; !strings.HasPrefix(v, tc.verdict) {
				t.Errorf("verdict %q, want %q...", v, tc.verdict)
			}
			var got []apm.Finding
			for _, f := range r.Findings {
				if f.Kind == OneSidedRearm {
					got = append(got, f.Finding)
				}
			}
			if len(got) != tc.want {
				t.Fatalf("%d one-sided-rearm findings, want %d: %+v", len(got), tc.want, got)
			}
			for _, f := range got {
				if f.Severity != tc.severity || f.QP.QPN != 200 {
					t.Errorf("finding %s on %v, want %s on QP 200", f.Severity, f.QP, tc.severity)
				}
				if (tc.severity == apm.SevWarning) != (f.Uncertain != "") || f.Uncertain != "" && !strings.Contains(f.Explanation, "lost 3 events") {
					t.Errorf("uncertain %q explanation %q", f.Uncertain, f.Explanation)
				}
			}
		})
	}
}
