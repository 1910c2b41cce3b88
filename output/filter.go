// Package output renders events (a streaming table, or JSON lines), filters
// them, prints the summary of a trace, and runs the trace and probes
// commands on an injected event source.
package output

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apmwatch/apmwatch/event"
)

// Filter keeps events matching every non-empty criterion (any value of a
// criterion matches). The zero Filter keeps everything.
type Filter struct {
	Devices []string
	QPNs    []uint32
	PIDs    []uint32
	Comms   []string
	Kinds   []event.Kind
}

// ParseFilter builds a Filter from flag values; each value may also be a
// comma-separated list.
func ParseFilter(devices, qpns, pids, comms, kinds []string) (Filter, error) {
	var f Filter
	f.Devices = split(devices)
	f.Comms = split(comms)
	for _, s := range split(qpns) {
		n, err := parseUint32(s)
		if err != nil {
			return f, fmt.Errorf("bad --qpn %q: want a number (decimal or 0x hex)", s)
		}
		f.QPNs = append(f.QPNs, n)
	}
	for _, s := range split(pids) {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return f, fmt.Errorf("bad --pid %q: want a number", s)
		}
		f.PIDs = append(f.PIDs, uint32(n))
	}
	for _, s := range split(kinds) {
		k, err := event.ParseKind(s)
		if err != nil {
			return f, fmt.Errorf("bad --kind %q: want one of %s", s, kindList())
		}
		f.Kinds = append(f.Kinds, k)
	}
	return f, nil
}

func parseUint32(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 0, 32)
	return uint32(n), err
}

func kindList() string {
	var names []string
	for _, k := range event.Kinds() {
		names = append(names, k.String())
	}
	return strings.Join(names, ", ")
}

func split(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// Match reports whether the filter keeps e. Criteria are strict: an event
// without a QPN (a MAD, a port event) never matches --qpn, and events raised
// in kernel context (QP events, received MADs) carry that context's pid and
// comm.
func (f Filter) Match(e *event.Event) bool {
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, e.Kind) {
		return false
	}
	if len(f.Devices) > 0 && !slices.Contains(f.Devices, e.Device) {
		return false
	}
	if len(f.QPNs) > 0 && (e.QPN == 0 || !slices.Contains(f.QPNs, e.QPN)) {
		return false
	}
	if len(f.PIDs) > 0 && !slices.Contains(f.PIDs, e.PID) {
		return false
	}
	if len(f.Comms) > 0 && !slices.Contains(f.Comms, e.Comm) {
		return false
	}
	return true
}
