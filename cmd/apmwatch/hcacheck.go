package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/apmwatch/apmwatch/hcacheck"
	"github.com/spf13/cobra"
)

func newHCACheckCmd() *cobra.Command {
	cfg := hcacheck.DefaultConfig()
	var output string
	cmd := &cobra.Command{
		Use:   "hca-check --dev D [--port P --alt-port Q]",
		Short: "Ask this HCA's firmware what no driver source answers (root)",
		Long: "Makes its own loopback RC pair on device D (QP A and QP B, primary path on --port, alternate\n" +
			"on --alt-port; the same port: its LMC path), arms it, and drives each firmware-decided point:\n" +
			"modify to ARMED, REARM on ARMED, MIGRATED from REARM, a forced migration (is PATH_MIG raised at\n" +
			"the forcing side, inside the modify or after it; does the peer raise it), the alternate after a\n" +
			"migration, COMM_EST after it, one-way traffic after both rearm, and a dead alternate. Prints each\n" +
			"answer with the errno, events and QUERY_QP readings seen, and the lab HCA knob values they\n" +
			"match; then destroys everything it made. Touches no other QP. Refuses a port whose link layer is\n" +
			"not InfiniBand. Needs the raw uverbs ABI to reach the driver: mlx4/mlx5 need a libibverbs\n" +
			"backend, which this build does not have. -o table fits 80 columns (a point a line, its detail\n" +
			"under it), -o wide is the table in full, -o json one document. See docs/hca-check.md.",
		Example: "  apmwatch hca-check --dev mlx5_0\n" +
			"  apmwatch hca-check --dev ibsim0 --port 1 --alt-port 2 -o json",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(cmd, output)
			if err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return hcacheck.Run(ctx, cfg, format == formatJSON, hcacheck.Deps{Sys: "/sys", Stdout: cmd.OutOrStdout(), Wide: format == formatWide})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.Device, "dev", "", "the RDMA device (required)")
	_ = cmd.RegisterFlagCompletionFunc("dev", completeDevices)
	fl.Uint8Var(&cfg.Port, "port", cfg.Port, "the port of both QPs' primary path")
	fl.Uint8Var(&cfg.AltPort, "alt-port", cfg.AltPort, "the port of their alternate path (equal to --port: its LMC path)")
	fl.Uint16Var(&cfg.DeadLID, "dead-lid", cfg.DeadLID, "a LID no port answers, for the dead alternate")
	fl.Uint8Var(&cfg.Timeout, "timeout", cfg.Timeout, "the QPs' local ACK timeout exponent (4.096 us << N per try)")
	fl.Uint8Var(&cfg.RetryCnt, "retry-cnt", cfg.RetryCnt, "the QPs' retry count")
	fl.DurationVar(&cfg.ArmWait, "arm-wait", cfg.ArmWait, "how long to wait for the QPs to read ARMED")
	fl.DurationVar(&cfg.EventWait, "event-wait", cfg.EventWait, "how long to wait for an async event (PATH_MIG after a forced migration)")
	fl.DurationVar(&cfg.FailWait, "fail-wait", cfg.FailWait, "how long to wait for the dead alternate's retries to run out")
	addWideOutputFlag(cmd, &output, " (one document)")
	return cmd
}
