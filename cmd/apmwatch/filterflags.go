package main

import (
	"strings"

	"github.com/apmwatch/apmwatch/collector"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/output"
	"github.com/spf13/pflag"
)

// filterFlags are the --device, --qpn, --pid, --comm and --kind flags that
// pick events (and, where the model runs, findings). Every command that
// filters registers them with addFilterFlags and reads them with filter.
type filterFlags struct {
	devices, qpns, pids, comms, kinds []string
}

// Which flags a command takes, and whether they pick findings too.
const (
	filterQP       = iota // --device, --qpn
	filterEvents          // and --pid, --comm, --kind (event kinds)
	filterFindings        // as filterEvents; they pick findings too, and --kind takes finding kinds
)

func addFilterFlags(fl *pflag.FlagSet, f *filterFlags, set int) {
	scope := ""
	if set != filterEvents {
		scope = " (events and findings)"
	}
	fl.StringSliceVar(&f.devices, "device", nil, "only these RDMA devices"+scope)
	fl.StringSliceVar(&f.qpns, "qpn", nil, "only these QP numbers"+scope)
	if set == filterQP {
		return
	}
	var kinds []string
	for _, k := range event.Kinds() {
		kinds = append(kinds, k.String())
	}
	eventKinds := strings.Join(kinds, ", ")
	who, kindUsage := "only events raised by", "only these event kinds ("+eventKinds+")"
	if set == filterFindings {
		who = "only events raised by, and findings about QPs of,"
		kindUsage = "only these kinds: event kinds (" + eventKinds + "), finding kinds (missed-rearm, ...), or finding for every finding"
	}
	fl.StringSliceVar(&f.pids, "pid", nil, who+" these processes")
	fl.StringSliceVar(&f.comms, "comm", nil, who+" these commands")
	fl.StringSliceVar(&f.kinds, "kind", nil, kindUsage)
}

// filter parses the flags; a bad value is a usage error.
func (f *filterFlags) filter() (output.Filter, error) {
	flt, err := output.ParseFilter(f.devices, f.qpns, f.pids, f.comms, f.kinds)
	if err != nil {
		return flt, usageError{err}
	}
	return flt, nil
}

// addRingFlag adds --ring-buffer-mib (trace, record, audit); checkRing
// validates it before anything is attached.
func addRingFlag(fl *pflag.FlagSet, mib *int) {
	fl.IntVar(mib, "ring-buffer-mib", collector.DefaultRingMiB, "the probes' ring buffer in MiB, a power of two (136 bytes a record, 192 with paths; lost events are counted)")
}

func checkRing(mib int) error {
	if err := collector.CheckRingMiB(mib); err != nil {
		return usageError{err}
	}
	return nil
}

// addAttachFlags adds what changes how the probes attach (trace, record,
// audit, probes): --event-hook (more QP event handlers) and --btf
// (external BTF for modules without their own).
func addAttachFlags(fl *pflag.FlagSet, opts *collector.Options) {
	fl.StringVar(&opts.BTFDir, "btf", "", "external BTF for RDMA modules that carry none (MLNX_OFED, RHEL 8): a directory of MODULE.btf files, split against vmlinux or standalone (default /var/lib/apmwatch/btf/$(uname -r) when present)")
	fl.StringSliceVar(&opts.EventHooks, "event-hook", nil, "also watch this (struct ib_event *, void *) QP event handler: FUNC or MODULE:FUNC")
	fl.StringSliceVar(&opts.RawEventHooks, "raw-event-hook", nil, "(lab) also watch this function as a raw driver event hook shaped like mlx5_ib_qp_event: MODULE:FUNC")
	_ = fl.MarkHidden("raw-event-hook")
}
