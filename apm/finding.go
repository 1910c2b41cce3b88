package apm

import (
	"fmt"
	"time"
)

// Kind names a finding. The strings are an interface (JSON "kind", filters,
// docs/findings.md): keep them.
type Kind string

const (
	MissedRearm      Kind = "missed-rearm"
	RearmWithoutAlt  Kind = "rearm-without-new-alternate"
	LAPRace          Kind = "lap-race"
	MigStateMismatch Kind = "mig-state-mismatch"
	MigrationError   Kind = "migration-error"
	Flapping         Kind = "flapping"
	APMModifyFailed  Kind = "apm-modify-failed"
	NeverArmed       Kind = "never-armed"
	CMNotNotified    Kind = "cm-not-notified"
	StuckRearm       Kind = "stuck-rearm"
)

// Kinds lists every finding kind in documentation order.
func Kinds() []Kind {
	return []Kind{MissedRearm, RearmWithoutAlt, LAPRace, MigStateMismatch, MigrationError,
		Flapping, APMModifyFailed, NeverArmed, CMNotNotified, StuckRearm}
}

// ParseKind checks a kind name.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds() {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown finding kind %q", s)
}

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
	Resolved    bool          `json:"resolved,omitempty"`
	Resolves    uint64        `json:"resolves,omitempty"`
	Unprotected time.Duration `json:"unprotected_ns,omitempty"` // missed-rearm resolution: migration to rearm
}

// Duration is Last minus First.
func (f *Finding) Duration() time.Duration { return time.Duration(f.Last - f.First) }

func (f *Finding) String() string {
	s := fmt.Sprintf("%s %s %s", f.Severity, f.Kind, f.QP)
	if f.Resolved {
		s += " resolved"
	}
	return s + ": " + f.Explanation
}

// Remediations in the seed thread's terms.
const (
	stepsRemedy = "after each migration, on each side: (1) send a LAP with the new alternate path, " +
		"(2) load it with ib_modify_qp RTS->RTS IB_QP_ALT_PATH (remote LID from the LAP), " +
		"(3) rearm with RTS->RTS IB_QP_PATH_MIG_STATE=REARM"
	remedyRearm    = "rearm: " + stepsRemedy
	remedyNewAlt   = "load a new alternate path on a different route than the current primary (IB_QP_ALT_PATH) before or with the rearm, after sending a LAP with it; " + stepsRemedy
	remedyLAP      = "keep the order and the window: LAP and new alternate between PATH_MIG and COMM_EST, then rearm; answer every received LAP with an APR; " + stepsRemedy
	remedyNotify   = "call ib_cm_notify(cm_id, IB_EVENT_PATH_MIG) (rdma_notify with rdma_cm) from the PATH_MIG handler so the CM switches to the new path, then " + stepsRemedy
	remedyMigErr   = "the alternate path is bad: choose a working path, send a LAP with it, load it as the new alternate and rearm; the QP has no failover until then"
	remedyFlap     = "the paths keep failing: check links, cables and the SM; do not rearm onto the path the QP just left; load an alternate on a different route, then rearm"
	remedyNeverArm = "rearm (RTS->RTS IB_QP_PATH_MIG_STATE=REARM) after loading the alternate path: a loaded alternate is not used until the QP is ARMED"
	remedyStuck    = "REARM becomes ARMED only when a packet with MigReq=0 arrives: make sure the peer did its three steps (LAP, load new alternate, rearm) and that traffic flows"
	remedyMismatch = "query the QP after each PATH_MIG and redo the three steps only from a known state: " + stepsRemedy
)
