package apm

import (
	"errors"
	"fmt"
	"time"
)

// Config holds every threshold of the model. The zero value is not useful:
// start from DefaultConfig.
type Config struct {
	// ReorderWindow is how long an event is held back so that events from
	// other CPUs with an earlier Boot stamp can overtake it.
	ReorderWindow time.Duration
	// RearmDeadline is the time from a migration to a successful rearm
	// (missed-rearm). It measures software (the PATH_MIG handler doing the
	// three steps), not the HCA: the migration is already over when
	// PATH_MIG is raised, however long the retries took to get there.
	RearmDeadline time.Duration
	// ArmDeadline is the time a QP in RTS may sit with a loaded alternate
	// path and no rearm (never-armed).
	ArmDeadline time.Duration
	// NotifyDeadline is the time from a migration on a CM-managed QP to
	// ib_cm_notify(PATH_MIG) (cm-not-notified).
	NotifyDeadline time.Duration
	// LAPDeadline is the time a received LAP may wait for an APR
	// (lap-race, cm_id stuck in LAP_RCVD).
	LAPDeadline time.Duration
	// EpisodeLinger is how long after its rearm an alternate load still
	// belongs to the episode (lap-race, steps 2 and 3 swapped). It is its own
	// window: no other deadline stretches it.
	EpisodeLinger time.Duration
	// FlapCount migrations within FlapWindow make a flapping finding. A
	// hardware migration comes only when the retries on the primary run
	// out, (retry_cnt+1) x 4.096 us x 2^timeout: 0.5 s with timeout 14 and
	// 7 retries, up to about a minute with the CM's timeouts (from the
	// path's packet life time). FlapWindow must hold FlapCount of those.
	FlapCount  int
	FlapWindow time.Duration
	// StuckRearm is how long the ground truth may read REARM (stuck-rearm).
	StuckRearm time.Duration
	// TruthGrace is how long a ground-truth reading of MIGRATED after a
	// rearm waits for a PATH_MIG event that explains it before it is
	// called a mismatch (the event is delivered after the hardware moved).
	TruthGrace time.Duration
	// DuplicateWindow is how far apart the two copies of one QP event may
	// be: the driver's (QPN only) and ib_core's or ib_uverbs' (typed).
	DuplicateWindow time.Duration
	// PortFailureWindow is how long a dead path may take to kill a QP: the
	// retries on an outstanding request running out, (retry_cnt+1) x
	// 4.096 us x 2^timeout, up to about a minute with the CM's timeouts,
	// plus the owner's reaction to its RETRY_EXC_ERR completion. The
	// owner's modify to ERR or RESET, or its destroy, this soon after a
	// PORT_ERR on the QP's primary port is the loss of the connection
	// (unprotected-failure); a QP that dies this soon after a migration,
	// before the path it moved onto was proven, died on a dead alternate
	// (migration-error). An idle QP notices nothing, so no window can cover
	// every case: past it, the owner's teardown is taken as its own choice.
	PortFailureWindow time.Duration
	// CallWait is how long a modify of the APM attributes that entered
	// (event.KindModifyEntry) and has not returned holds the deadlines it
	// could meet: a firmware command completes within the driver's command
	// timeout (mlx5: 60 s). A call that entered before a deadline is judged
	// by its entry once its record comes.
	CallWait time.Duration
	// MaxPending bounds the inputs held in the reorder window (0: no bound).
	// Past it the oldest is applied at once and later, older inputs are
	// late: memory and ordering work stay bounded whatever a source (or a
	// crafted recording) packs into one window.
	MaxPending int
	// MaxQPs bounds the number of tracked QPs; 0 means no bound. Events for
	// new QPs beyond it are counted in Stats.Dropped.
	MaxQPs int
}

// DefaultConfig returns the documented defaults (docs/findings.md).
func DefaultConfig() Config {
	return Config{
		ReorderWindow:  50 * time.Millisecond,
		RearmDeadline:  2 * time.Second,
		ArmDeadline:    2 * time.Second,
		NotifyDeadline: 2 * time.Second,
		LAPDeadline:    2 * time.Second,
		EpisodeLinger:  2 * time.Second,
		FlapCount:      3,
		FlapWindow:     5 * time.Minute,
		StuckRearm:     10 * time.Second,
		TruthGrace:     1 * time.Second,

		DuplicateWindow: 500 * time.Millisecond,

		PortFailureWindow: 2 * time.Minute,
		CallWait:          61 * time.Second,
		MaxPending:        1 << 16,
	}
}

// Validate reports the first invalid threshold.
func (c Config) Validate() error {
	var errs []error
	neg := func(name string, d time.Duration) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative: %v", name, d))
		}
	}
	pos := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive: %v", name, d))
		}
	}
	neg("reorder window", c.ReorderWindow)
	pos("rearm deadline", c.RearmDeadline)
	pos("arm deadline", c.ArmDeadline)
	pos("notify deadline", c.NotifyDeadline)
	pos("lap deadline", c.LAPDeadline)
	neg("episode linger", c.EpisodeLinger)
	pos("flap window", c.FlapWindow)
	pos("stuck rearm", c.StuckRearm)
	neg("truth grace", c.TruthGrace)
	neg("duplicate window", c.DuplicateWindow)
	neg("port failure window", c.PortFailureWindow)
	neg("call wait", c.CallWait)
	if c.FlapCount < 2 || c.FlapCount > 64 {
		errs = append(errs, fmt.Errorf("flap count must be in 2..64: %d", c.FlapCount))
	}
	if c.MaxPending < 0 {
		errs = append(errs, fmt.Errorf("max pending must not be negative: %d", c.MaxPending))
	}
	if c.MaxQPs < 0 {
		errs = append(errs, fmt.Errorf("max qps must not be negative: %d", c.MaxQPs))
	}
	return errors.Join(errs...)
}
