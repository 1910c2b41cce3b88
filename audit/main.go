package audit

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Main runs the daemon until SIGTERM or SIGINT (then flushes and returns
// nil); SIGHUP reopens the finding log.
func Main(ctx context.Context, cfg Config, deps Deps) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reopen := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-hup:
				select {
				case reopen <- struct{}{}:
				default:
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	deps.Reopen = reopen
	return Run(ctx, cfg, deps)
}
