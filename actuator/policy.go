package actuator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Policy says when `apmwatch audit` may change a QP. It is plain data (a
// JSON file, checked without root by `apmwatch actuate policy-check`); an
// empty allowlist allows nothing. docs/actuator.md documents every field.
type Policy struct {
	// Mode is "monitor" (default: say what would be done, send nothing) or
	// "enforce". The --enforce flag overrides it to "enforce".
	Mode string `json:"mode"`
	// Grace is added to the model's rearm deadline before acting: the
	// owner gets this much more time to rearm itself.
	Grace Duration `json:"grace"`
	// Allow lists what may be touched; every non-empty list must match.
	Allow Allow `json:"allow"`
	// RateLimit bounds the actions (all QPs together).
	RateLimit RateLimit `json:"rate_limit"`
	// Alternates is the configured table of new alternate paths, tried
	// first; the first entry that matches the QP is used.
	Alternates []AltRule `json:"alternates"`
	// PreviousPrimary loads the path the QP migrated away from as the new
	// alternate when its port is ACTIVE again.
	PreviousPrimary bool `json:"previous_primary"`
	// RearmWithoutAlternate rearms even when no new alternate could be
	// loaded (none configured, its port down, or refused: always on RoCE).
	// The QP is then armed onto whatever alternate it holds: say so.
	RearmWithoutAlternate bool `json:"rearm_without_alternate"`
}

// Allow is the allowlist. At least one list must be non-empty.
type Allow struct {
	Devices []string `json:"devices"`
	Comms   []string `json:"comms"`
	PIDs    []uint32 `json:"pids"`
}

// RateLimit allows Max actions per Per.
type RateLimit struct {
	Max int      `json:"max"`
	Per Duration `json:"per"`
}

// AltRule gives the new alternate path for QPs on a device (and, when
// Port is not 0, whose primary is on that port).
type AltRule struct {
	Device string  `json:"device"`
	Port   uint8   `json:"port,omitempty"`
	Alt    AltSpec `json:"alt"`
}

// AltSpec is an alternate path in the policy file.
type AltSpec struct {
	Port      uint8  `json:"port"`
	DLID      uint16 `json:"dlid,omitempty"`
	DGID      string `json:"dgid,omitempty"`
	SGIDIndex uint8  `json:"sgid_index,omitempty"`
	PKeyIndex uint16 `json:"pkey_index,omitempty"`
	Timeout   uint8  `json:"timeout,omitempty"`
	SL        uint8  `json:"sl,omitempty"`
	HopLimit  uint8  `json:"hop_limit,omitempty"`
}

// Path converts the spec (validated) to an AltPath.
func (s AltSpec) Path() (*AltPath, error) {
	if s.Port == 0 {
		return nil, errors.New("alt.port must be set")
	}
	if s.DLID == 0 && s.DGID == "" {
		return nil, errors.New("alt needs dlid or dgid")
	}
	p := &AltPath{Port: s.Port, PKeyIndex: s.PKeyIndex, Timeout: s.Timeout,
		Dest: Dest{DLID: s.DLID, SL: s.SL, PortNum: s.Port}}
	if p.Timeout == 0 {
		p.Timeout = 14
	}
	if s.DGID != "" {
		g, err := ParseGID(s.DGID)
		if err != nil {
			return nil, err
		}
		p.Dest.DGID, p.Dest.IsGlobal, p.Dest.SGIDIndex, p.Dest.HopLimit = g, true, s.SGIDIndex, s.HopLimit
		if p.Dest.HopLimit == 0 {
			p.Dest.HopLimit = 64
		}
	}
	return p, nil
}

// Duration is a time.Duration written as "30s" in JSON.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30s\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Modes.
const (
	ModeMonitor = "monitor"
	ModeEnforce = "enforce"
)

// DefaultPolicy is monitor mode, one action a minute, nothing allowed.
func DefaultPolicy() Policy {
	return Policy{Mode: ModeMonitor, RateLimit: RateLimit{Max: 1, Per: Duration(time.Minute)}}
}

// LoadPolicy reads and validates a policy file (unknown fields are errors).
func LoadPolicy(path string) (Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Policy{}, err
	}
	return ParsePolicy(b)
}

// ParsePolicy decodes and validates a policy.
func ParsePolicy(b []byte) (Policy, error) {
	p := DefaultPolicy()
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	return p, p.Validate()
}

// Validate reports every problem in one line.
func (p Policy) Validate() error {
	var errs []string
	if p.Mode != ModeMonitor && p.Mode != ModeEnforce {
		errs = append(errs, fmt.Sprintf("mode must be monitor or enforce, not %q", p.Mode))
	}
	if p.Grace < 0 {
		errs = append(errs, "grace must not be negative")
	}
	if len(p.Allow.Devices)+len(p.Allow.Comms)+len(p.Allow.PIDs) == 0 {
		errs = append(errs, "allow needs at least one device, comm or pid (an empty allowlist allows nothing)")
	}
	if p.RateLimit.Max < 1 || p.RateLimit.Per <= 0 {
		errs = append(errs, "rate_limit needs max >= 1 and a positive per")
	}
	for i, r := range p.Alternates {
		if r.Device == "" {
			errs = append(errs, fmt.Sprintf("alternates[%d]: device must be set", i))
		}
		if _, err := r.Alt.Path(); err != nil {
			errs = append(errs, fmt.Sprintf("alternates[%d]: %v", i, err))
		}
	}
	if len(errs) > 0 {
		return errors.New("policy: " + strings.Join(errs, "; "))
	}
	return nil
}

// allows checks the allowlist; the reason says what did not match.
func (p Policy) allows(device, comm string, pid uint32) (bool, string) {
	if len(p.Allow.Devices) > 0 && !contains(p.Allow.Devices, device) {
		return false, fmt.Sprintf("device %s not in allow.devices", device)
	}
	if len(p.Allow.Comms) > 0 && !contains(p.Allow.Comms, comm) {
		return false, fmt.Sprintf("comm %q not in allow.comms", comm)
	}
	if len(p.Allow.PIDs) > 0 {
		for _, x := range p.Allow.PIDs {
			if x == pid {
				return true, ""
			}
		}
		return false, fmt.Sprintf("pid %d not in allow.pids", pid)
	}
	return true, ""
}

// alternate picks the configured alternate for a QP on device whose
// primary is on port.
func (p Policy) alternate(device string, port uint8) (*AltPath, bool) {
	for _, r := range p.Alternates {
		if r.Device == device && (r.Port == 0 || r.Port == port) {
			a, err := r.Alt.Path()
			return a, err == nil
		}
	}
	return nil, false
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
