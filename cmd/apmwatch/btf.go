package main

import (
	"github.com/apmwatch/apmwatch/btfgen"
	"github.com/apmwatch/apmwatch/collector"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func newBTFCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "btf",
		Short: "External BTF for RDMA modules that carry none (MLNX_OFED, RHEL 8)",
		Args:  noArgs,
	}
	cmd.AddCommand(newBTFGenCmd())
	return cmd
}

func newBTFGenCmd() *cobra.Command {
	var o btfgen.Options
	var modules []string
	cmd := &cobra.Command{
		Use:   "gen",
		Short: "Write MODULE.btf for the RDMA modules from their BTF or debug info",
		Long: "Writes one MODULE.btf per module apmwatch hooks that is loaded and has no BTF in /sys/kernel/btf, " +
			"into --dir (default /var/lib/apmwatch/btf/$(uname -r), where trace, record, audit and probes look). " +
			"A module's file is looked for under --debug-dir, then the distribution's debug trees and /lib/modules; " +
			"its own .BTF section serves as it is, else pahole encodes its debug info split against this kernel's vmlinux. " +
			"With --min only the types apmwatch's probes read are kept, their unread members left out (a few KiB a module). " +
			"One line per module says what was written or exactly what is missing; the exit status is 1 when one is missing.",
		Example: "  apmwatch btf gen\n  apmwatch btf gen --debug-dir /usr/lib/debug/lib/modules/$(uname -r) \\\n      --module mlx5_ib",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var u unix.Utsname
			if err := unix.Uname(&u); err != nil {
				return err
			}
			o.Release = unix.ByteSliceToString(u.Release[:])
			if o.Dir == "" {
				o.Dir = collector.BTFDefaultDir()
			}
			o.Modules, o.Loaded = modules, len(modules) == 0
			if o.Loaded {
				o.Modules = collector.HookModules()
			}
			if o.Min {
				var err error
				if o.Local, err = collector.ProgramBTF(); err != nil {
					return err
				}
			}
			o.SysBTF, o.SysModule, o.Out = "/sys/kernel/btf", "/sys/module", cmd.OutOrStdout()
			_, err := btfgen.Gen(o)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Dir, "dir", "", "where to write MODULE.btf (default /var/lib/apmwatch/btf/$(uname -r))")
	fl.StringSliceVar(&o.DebugDirs, "debug-dir", nil, "also look for module files (MODULE.ko, .ko.debug, compressed) under this directory, first")
	fl.StringSliceVar(&modules, "module", nil, "these modules, loaded or not (default: apmwatch's modules that are loaded)")
	fl.BoolVar(&o.Force, "force", false, "also for modules whose BTF the kernel has")
	fl.BoolVar(&o.Min, "min", false, "keep only the types and members apmwatch's probes read")
	return cmd
}
