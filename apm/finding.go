package apm

import (
	"fmt"
	"time"
)

// Severity orders findings.
type Severity uint8

const (
	SevInfo Severity = iota
	SevWarning
	SevError
	SevCritical
)

var sevNames = [...]string{"info", "warning", "error", "critical"}

func (s Severity) String() string {
	if int(s) < len(sevNames) {
		return sevNames[s]
	}
	return fmt.Sprintf("severity(%d)", uint8(s))
}

// ParseSeverity reads a severity by its name (info, warning, error,
// critical).
func ParseSeverity(name string) (Severity, error) {
	for i, n := range sevNames {
		if n == name {
			return Severity(i), nil
		}
	}
	return 0, fmt.Errorf("unknown severity %q: want info, warning, error or critical", name)
}

// MarshalText makes Severity a JSON string.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Key identifies one QP history: the QP number on a device, and the
// generation of that QP. Generations come from one counter per Model: every
// QP create (and every first sight of a QP the model did not see created)
// takes the next value, so a QPN reused after destroy never shares a history.
type Key struct {
	Device string `json:"device"`
	QPN    uint32 `json:"qpn"`
	Gen    uint32 `json:"gen"`
}

func (k Key) String() string { return fmt.Sprintf("%s/%d#%d", k.Device, k.QPN, k.Gen) }

// Evidence is one event (or ground-truth reading) that proves a finding.
// Seq is the source's sequence number; it is 0 for a ground-truth reading.
type Evidence struct {
	Seq  uint64 `json:"seq"`
	Boot uint64 `json:"boot_ns"`
	What string `json:"what"`
}

// Finding is one judgement on a QP history. A resolution update has
// Resolved set, the same Kind, and Resolves naming the ID of the finding it
// closes.
type Finding struct {
	ID          uint64        `json:"id"`
	Kind        Kind          `json:"kind"`
	Severity    Severity      `json:"severity"`
	QP          Key           `json:"qp"`
	PID         uint32        `json:"pid"`
	Comm        string        `json:"comm"`
	First       uint64        `json:"first_boot_ns"`
	Last        uint64        `json:"last_boot_ns"`
	FirstTime   time.Time     `json:"first_time,omitzero"` // First plus the source's boot-to-wall offset, when known
	LastTime    time.Time     `json:"last_time,omitzero"`
	Evidence    []Evidence    `json:"evidence"`
	Explanation string        `json:"explanation"`
	Remediation string        `json:"remediation"`
	Errno       int32         `json:"errno,omitempty"` // apm-modify-failed, lap-race from a failed notify
	Resolved    bool          `json:"resolved"`
	Resolves    uint64        `json:"resolves,omitempty"`
	Unprotected time.Duration `json:"unprotected_ns,omitempty"` // missed-rearm resolution, unprotected-failure: time without a valid armed alternate
	Cause       uint64        `json:"cause,omitempty"`          // unprotected-failure: the finding that left the QP unprotected
	// Uncertain, when set, says which missing records (events lost,
	// damaged frames) overlap the finding's window: what they could have
	// held is not known, and the finding claims no more than it saw.
	Uncertain string `json:"uncertain,omitempty"`
	// JudgedAt is the model time (Boot) the finding was judged at: the
	// input or deadline that decided it, at or after Last. Judged past
	// Last, it waited for something (a call in progress, a reading's
	// grace, a late record). 0 where no model judged it (pairing, fleet).
	JudgedAt uint64 `json:"judged_at,omitempty"`
}

// Duration is Last minus First.
func (f *Finding) Duration() time.Duration {
	if f.Last < f.First {
		return 0
	}
	return time.Duration(f.Last - f.First)
}

func (f *Finding) String() string {
	s := fmt.Sprintf("%s %s %s", f.Severity, f.Kind, f.QP)
	if f.Resolved {
		s += " resolved"
	}
	return s + ": " + f.Explanation
}
