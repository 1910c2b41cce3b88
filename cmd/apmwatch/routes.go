package main

import (
	"github.com/apmwatch/apmwatch/fabric"
	"github.com/spf13/cobra"
)

func newRoutesCmd() *cobra.Command {
	var q fabric.Query
	var output string
	cmd := &cobra.Command{
		Use:   "routes --topology F --lfts F --from LID --to LID [--alt LID]",
		Short: "Walk a route through the switches' forwarding tables",
		Long: "Reads the fabric as its operators already have it: the topology ibnetdiscover prints\n" +
			"(--topology) and the switches' unicast forwarding tables dump_lfts, ibroute or OpenSM's\n" +
			"opensm-lfts.dump print (--lfts). Walks the route from the port of LID --from (its path bits\n" +
			"included) to the port of LID --to, switch by switch: each switch's GUID and name, the port it\n" +
			"enters by and the port its table sends the LID out of. With --alt, walks the second route too\n" +
			"(from --alt-from, by default --from) and lists every switch and switch-to-switch link both\n" +
			"cross, the end ports apart: an APM alternate that shares them with its primary fails with it.\n" +
			"The routes are what the dumped tables say when they were dumped. -o table fits 80 columns,\n" +
			"-o wide is the table in full, -o json one document. See docs/routes.md.",
		Example: "  apmwatch routes --topology topo.out --lfts lfts.out --from 2 --to 22\n" +
			"  apmwatch routes --topology topo.out --lfts lfts.out --from 2 --to 22 \\\n" +
			"      --alt 23 -o json",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(cmd, output)
			if err != nil {
				return err
			}
			if err := q.Validate(); err != nil {
				return usageError{err}
			}
			q.JSON, q.Wide = format == formatJSON, format == formatWide
			return fabric.Run(q, fabric.DefaultLimits(), cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&q.Topology, "topology", "", "ibnetdiscover's output (required)")
	fl.StringVar(&q.LFTs, "lfts", "", "the unicast forwarding tables: dump_lfts, ibroute or opensm-lfts.dump output (required)")
	fl.Uint16Var(&q.From, "from", 0, "the source LID, path bits included (required)")
	fl.Uint16Var(&q.To, "to", 0, "the destination LID (required)")
	fl.Uint16Var(&q.Alt, "alt", 0, "the second route's destination LID (an APM alternate's DLID)")
	fl.Uint16Var(&q.AltFrom, "alt-from", 0, "the second route's source LID (default --from)")
	addWideOutputFlag(cmd, &output, " (one document)")
	return cmd
}
