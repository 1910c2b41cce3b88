// Package output renders events and findings (a streaming table, or JSON
// lines), filters them, prints the summary of a trace and the hook table
// (the probes command). Running a trace is package session's job.
package output

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
)

// Filter keeps events and findings matching every non-empty criterion (any
// value of a criterion matches). The zero Filter keeps everything.
//
// Kinds, Findings and AllFindings together are the --kind criterion: when
// any is set, an event is kept if its kind is in Kinds and a finding if its
// kind is in Findings or AllFindings is set.
type Filter struct {
	Devices     []string
	QPNs        []uint32
	PIDs        []uint32
	Comms       []string
	Kinds       []event.Kind
	Findings    []apm.Kind
	AllFindings bool // --kind finding
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
		if err := event.CheckQPN(n); err != nil {
			return f, err
		}
		f.QPNs = append(f.QPNs, n)
	}
	for _, s := range split(pids) {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return f, fmt.Errorf("bad --pid %q: want a number", s)
		}
		if err := event.CheckPID(int64(n)); err != nil {
			return f, err
		}
		f.PIDs = append(f.PIDs, uint32(n))
	}
	for _, s := range split(kinds) {
		if s == "finding" {
			f.AllFindings = true
			continue
		}
		if fk, err := apm.ParseKind(s); err == nil {
			f.Findings = append(f.Findings, fk)
			continue
		}
		k, err := event.ParseKind(s)
		if err != nil {
			return f, fmt.Errorf("bad --kind %q: want an event kind (%s), finding, or a finding kind", s, kindList())
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
	if f.kinded() && !slices.Contains(f.Kinds, e.Kind) {
		return false
	}
	return f.match(e.Device, e.QPN, e.PID, e.Comm)
}

// MatchFinding reports whether the filter keeps a finding: by its kind, its
// QP and its QP's owner.
func (f Filter) MatchFinding(x *apm.Finding) bool {
	if f.kinded() && !f.AllFindings && !slices.Contains(f.Findings, x.Kind) {
		return false
	}
	return f.match(x.QP.Device, x.QP.QPN, x.PID, x.Comm)
}

// Names reports whether --kind named this event kind.
func (f Filter) Names(k event.Kind) bool { return slices.Contains(f.Kinds, k) }

func (f Filter) kinded() bool { return len(f.Kinds) > 0 || len(f.Findings) > 0 || f.AllFindings }

func (f Filter) match(device string, qpn, pid uint32, comm string) bool {
	if len(f.Devices) > 0 && !slices.Contains(f.Devices, device) {
		return false
	}
	if len(f.QPNs) > 0 && (qpn == 0 || !slices.Contains(f.QPNs, qpn)) {
		return false
	}
	if len(f.PIDs) > 0 && !slices.Contains(f.PIDs, pid) {
		return false
	}
	if len(f.Comms) > 0 && !slices.Contains(f.Comms, comm) {
		return false
	}
	return true
}
