package main

import (
	"fmt"

	"github.com/apmwatch/apmwatch/actuator"
	"github.com/apmwatch/apmwatch/event"
	"github.com/spf13/cobra"
)

func newQPCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "qp",
		Short: "List and show RC/UC QPs: mig state, owner, uverbs handle",
		Example: "  apmwatch qp list\n" +
			"  apmwatch qp show --qpn 17",
		Args: noArgs,
	}
	var o actuator.ListOptions
	var output string
	var noHandles bool
	list := &cobra.Command{
		Use:   "list",
		Short: "Every RC/UC QP: its mig state, owner and handle",
		Long: "Every RC and UC QP the kernel lists over rdma netlink: device, QPN, remote QPN, type, state,\n" +
			"path-migration state, owner pid and command, and for user QPs the owner's uverbs file and QP\n" +
			"handle (found by borrowing the owner's file: needs root; --no-handles skips it). Kernel QPs show\n" +
			"kernel as their handle. -o table fits 80 columns, -o wide has every cell whole, -o json is one\n" +
			"document, {\"schema\":1,\"qps\":[...]} (docs/actuator.md maps its fields to rdma -j resource show qp).",
		Example: "  apmwatch qp list\n" +
			"  apmwatch qp list --device mlx5_0 --no-handles\n" +
			"  apmwatch qp list --pid 4242 -o json",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(cmd, output)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("pid") {
				if err := event.CheckPID(int64(o.PID)); err != nil {
					return usageError{err}
				}
			}
			o.Handles = !noHandles
			rows, err := actuator.New(nil).List(o)
			if err != nil {
				return err
			}
			if format == formatJSON {
				return actuator.WriteDoc(cmd.OutOrStdout(), actuator.ListDoc{Schema: actuator.DocSchema, QPs: append([]actuator.Row{}, rows...)})
			}
			return actuator.WriteTable(cmd.OutOrStdout(), rows, format == formatWide)
		},
	}
	list.Flags().IntVar(&o.PID, "pid", 0, "only QPs of this process")
	list.Flags().StringVar(&o.Device, "device", "", "only QPs on this RDMA device")
	_ = list.RegisterFlagCompletionFunc("device", completeDevices)
	addWideOutputFlag(list, &output, " (one document)")
	list.Flags().BoolVar(&noHandles, "no-handles", false, "do not borrow the owners' files to find handles")

	var device, showOut string
	var qpn uint32
	show := &cobra.Command{
		Use:   "show",
		Short: "One QP: the rdma netlink row and the owner's view through QUERY_QP",
		Long: "One QP: its rdma netlink row and, for a user QP, the owner's view of it through QUERY_QP on its\n" +
			"borrowed uverbs file (state, path-migration state, the primary and alternate paths). -o json is\n" +
			"one document: {\"schema\":1,\"qp\":{...},\"owner_view\":{...}}, enums as names.",
		Example: "  apmwatch qp show --qpn 17\n" +
			"  apmwatch qp show --qpn 17 --device mlx5_0 -o json",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(cmd, showOut)
			if err != nil {
				return err
			}
			asJSON := format == formatJSON
			if !cmd.Flags().Changed("qpn") {
				return usageError{fmt.Errorf("--qpn is required")}
			}
			if err := event.CheckQPN(qpn); err != nil {
				return usageError{err}
			}
			row, res, err := actuator.New(nil).Show(cmd.Context(), device, qpn)
			if err != nil {
				return err
			}
			if asJSON {
				return actuator.WriteDoc(cmd.OutOrStdout(), actuator.NewShowDoc(row, res))
			}
			if err := actuator.WriteTable(cmd.OutOrStdout(), []actuator.Row{row}, format == formatWide); err != nil {
				return err
			}
			if res != nil {
				return actuator.WriteResult(cmd.OutOrStdout(), res, false)
			}
			return nil
		},
	}
	show.Flags().Uint32Var(&qpn, "qpn", 0, "the QP number")
	show.Flags().StringVar(&device, "device", "", "the RDMA device (needed when the QPN exists on several)")
	_ = show.RegisterFlagCompletionFunc("device", completeDevices)
	addWideOutputFlag(show, &showOut, "")
	cmd.AddCommand(list, show)
	return cmd
}
