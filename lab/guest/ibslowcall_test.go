//go:build labguest

package guest

import (
	"testing"
	"time"
)

// A rearm the firmware takes 1.5 s to run (pm-latency). lab-ibpair reacts
// to both ends' PATH_MIG from one thread, a second after each: ibsim0's
// rearm enters 1 s after its migration and returns 2.5 s after it, past the
// 2 s deadline; ibsim1's waits for it and enters 2.5 s after its own
// migration. Each is judged by its entry: nothing on ibsim0, a missed
// rearm and its resolution on ibsim1, with mlx5's firmware answers (the
// latency is firmware's; the profile's other answers do not bear on it). The
// trace shows why: a modify-entry line (REARM), and the call's modify
// record with the same thread and stamp, whose duration ends past the
// deadline. (Readings taken meanwhile wait for the watermark, which the
// call in flight holds back: they are printed after its record.)
func TestIBSlowRearmJudgedByEntry(t *testing.T) {
	useProfile(t, "mlx5")
	tr, p, q0, q1 := ibPairScenario(t, "late-rearm=1s", "--kind", allKinds)
	// Slow once connected: while one end connects, the other's
	// unanswered requests would run out of retries.
	MustRun(t, "lab-ib", "knob", "pm-latency", "1500ms")
	t.Cleanup(func() { Run(t, "lab-ib", "knob", "pm-latency", "0") })
	portDown(t, p, 1, true, q0, q1)
	time.Sleep(settle)
	wantSet(t, tr, ibFindings(t, tr), fk("missed-rearm", "ibsim1", q1), fk("missed-rearm(resolved)", "ibsim1", q1))
	p.Stop(t)
	checkSlowRearm(t, tr.Lines(), "ibsim0", q0, true)
	checkSlowRearm(t, tr.Lines(), "ibsim1", q1, false)
}

// checkSlowRearm finds the QP's PATH_MIG, its rearm's announcement and its
// record, and checks that the call entered before the deadline (inTime) or
// after it, and that it returned after the deadline.
func checkSlowRearm(t *testing.T, lines []Line, dev string, qpn int64, inTime bool) {
	t.Helper()
	const deadline = int64(2 * time.Second)
	var mig, entry int64
	tid := int64(-1)
	for _, l := range lines {
		at := l.Int("boot_ns")
		mine := l.Str("device") == dev && l.Int("qpn") == qpn
		switch {
		case mine && mig == 0 && l.Str("kind") == "qp-event" && l.Str("event") == "PATH_MIG":
			mig = at
		case mine && mig != 0 && l.Str("kind") == "modify-entry" && l.Str("mig_state") == "REARM":
			if l.Has("ret") {
				t.Errorf("%s/%d: a modify-entry carries a return code: %v", dev, qpn, l)
			}
			entry, tid = at, l.Int("tid")
		case mine && entry != 0 && l.Str("kind") == "modify" && l.Str("mig_state") == "REARM" && l.Int("tid") == tid:
			if at != entry {
				t.Errorf("%s/%d: the rearm's record is stamped %d, its entry %d: want the entry's stamp", dev, qpn, at, entry)
			}
			took := time.Duration(l.Int("took_ns"))
			if took < 1400*time.Millisecond || took > 10*time.Second {
				t.Errorf("%s/%d: the rearm took %v by its record, want the firmware's 1.5 s", dev, qpn, took)
			}
			if (entry-mig < deadline) != inTime {
				t.Errorf("%s/%d: the rearm entered %v after the migration: the story needs it %s the deadline", dev, qpn,
					time.Duration(entry-mig), map[bool]string{true: "before", false: "after"}[inTime])
			}
			if entry+int64(took) <= mig+deadline {
				t.Errorf("%s/%d: the rearm returned %v after the migration: the call did not outlast the deadline", dev, qpn, time.Duration(entry+int64(took)-mig))
			}
			return
		}
	}
	t.Errorf("%s/%d: no PATH_MIG, modify-entry REARM and its modify record in the trace (migration at %d, entry at %d)", dev, qpn, mig, entry)
}
