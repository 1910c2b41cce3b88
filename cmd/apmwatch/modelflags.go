package main

import (
	"github.com/apmwatch/apmwatch/apm"
	"github.com/spf13/pflag"
)

// addModelFlags registers the APM model's thresholds (docs/findings.md) on
// fs; the values start from cfg and land in it. Shared by every command
// that runs the model: trace, postmortem and audit.
func addModelFlags(fs *pflag.FlagSet, cfg *apm.Config) {
	fs.DurationVar(&cfg.RearmDeadline, "rearm-deadline", cfg.RearmDeadline, "time from a migration to a successful rearm (missed-rearm)")
	fs.DurationVar(&cfg.ArmDeadline, "arm-deadline", cfg.ArmDeadline, "time a QP in RTS may hold a loaded alternate without a rearm (never-armed)")
	fs.DurationVar(&cfg.NotifyDeadline, "notify-deadline", cfg.NotifyDeadline, "time from a migration on a CM QP to ib_cm_notify(PATH_MIG) (cm-not-notified)")
	fs.DurationVar(&cfg.LAPDeadline, "lap-deadline", cfg.LAPDeadline, "time a received LAP may wait for its APR (lap-race)")
	fs.DurationVar(&cfg.EpisodeLinger, "episode-linger", cfg.EpisodeLinger, "how long an episode stays open after its rearm (lap-race: late alternate)")
	fs.IntVar(&cfg.FlapCount, "flap-count", cfg.FlapCount, "migrations within --flap-window that make a flapping finding")
	fs.DurationVar(&cfg.FlapWindow, "flap-window", cfg.FlapWindow, "the window of --flap-count")
	fs.DurationVar(&cfg.StuckRearm, "stuck-rearm", cfg.StuckRearm, "how long ground truth may read REARM (stuck-rearm)")
	fs.DurationVar(&cfg.TruthGrace, "truth-grace", cfg.TruthGrace, "how long a MIGRATED reading after a rearm waits for its PATH_MIG (mig-state-mismatch)")
	fs.DurationVar(&cfg.ReorderWindow, "reorder-window", cfg.ReorderWindow, "how long events are held to order the CPUs' streams by time")
	fs.IntVar(&cfg.MaxQPs, "max-qps", cfg.MaxQPs, "track at most this many QPs (0: no bound)")
}
