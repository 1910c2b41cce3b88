package postmortem

// A postmortem keeps what it needs for the report in memory; these bound
// it whatever the recordings hold, so that any file replays in bounded
// memory and time (docs/performance.md, "Hostile recordings"). What is
// beyond a bound is counted and the report says so.
const (
	// DefaultMaxQPs is the default --max-qps of postmortem: QP histories
	// kept per recording (each create of a QPN starts one).
	DefaultMaxQPs = 100_000
	// maxTimeline bounds the timeline entries of a whole report (with
	// --max-entries per QP): about 250 bytes each.
	maxTimeline = 100_000
	// maxFindings bounds the model findings kept for a report.
	maxFindings = 20_000
	// maxSteps bounds the migrations and rearms kept for pairing, in all.
	maxSteps = 1_000_000
	// maxCommIDs bounds the CM comm ids tied to QPs, per recording, and
	// maxQPCommIDs per QP.
	maxCommIDs   = 100_000
	maxQPCommIDs = 64
	// maxPeerCandidates bounds the histories of one QPN examined to pair a
	// QP (a QPN reused by thousands of generations).
	maxPeerCandidates = 256
	// maxWarnings bounds the distinct recording warnings printed and kept
	// per recording; the rest are counted.
	maxWarnings = 100
)

// budget is what a report may still keep, shared by its recordings, and
// what was left out.
type budget struct {
	timeline, findings, steps int

	DroppedQPs      uint64 // events of QPs beyond --max-qps
	DroppedTimeline uint64 // timeline entries beyond maxTimeline (not --max-entries)
	DroppedFindings uint64
	DroppedSteps    uint64
	DroppedWarnings uint64
}

func newBudget() *budget {
	return &budget{timeline: maxTimeline, findings: maxFindings, steps: maxSteps}
}

// take takes one from *n when there is one left.
func take(n *int) bool {
	if *n <= 0 {
		return false
	}
	*n--
	return true
}
