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
		Args:  cobra.NoArgs,
	}
	var o actuator.ListOptions
	var output string
	var noHandles bool
	list := &cobra.Command{
		Use:   "list",
		Short: "Every RC/UC QP from rdma netlink with its mig state, owner and handle",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := jsonOutput(output)
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
			return actuator.WriteRows(cmd.OutOrStdout(), rows, asJSON)
		},
	}
	list.Flags().IntVar(&o.PID, "pid", 0, "only QPs of this process")
	list.Flags().StringVar(&o.Device, "device", "", "only QPs on this RDMA device")
	list.Flags().StringVarP(&output, "output", "o", "table", "table or json (one object per line)")
	list.Flags().BoolVar(&noHandles, "no-handles", false, "do not borrow the owners' files to find handles")

	var device, showOut string
	var qpn uint32
	show := &cobra.Command{
		Use:   "show",
		Short: "One QP: the rdma netlink row and the owner's view through QUERY_QP",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := jsonOutput(showOut)
			if err != nil {
				return err
			}
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
			if err := actuator.WriteRows(cmd.OutOrStdout(), []actuator.Row{row}, asJSON); err != nil {
				return err
			}
			if res != nil {
				return actuator.WriteResult(cmd.OutOrStdout(), res, asJSON)
			}
			return nil
		},
	}
	show.Flags().Uint32Var(&qpn, "qpn", 0, "the QP number")
	show.Flags().StringVar(&device, "device", "", "the RDMA device (needed when the QPN exists on several)")
	show.Flags().StringVarP(&showOut, "output", "o", "text", "text or json")
	cmd.AddCommand(list, show)
	return cmd
}

func jsonOutput(s string) (bool, error) {
	switch s {
	case "json":
		return true, nil
	case "table", "text":
		return false, nil
	}
	return false, usageError{fmt.Errorf("--output must be table, text or json, not %q", s)}
}
