package actuator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/internal/escape"
)

// Policy says when `apmwatch audit` may change a QP. It is plain data (a
// JSON file, checked without root by `apmwatch actuate policy-check`); an
// empty allowlist allows nothing. docs/actuator.md documents every field.
type Policy struct {
	// Mode is "monitor" (default: say what would be done, send nothing) or
	// "enforce". On the command line the --enforce flag is the one switch:
	// "enforce" in the file without it stays monitor, with a warning
	// (Effective).
	Mode string `json:"mode"`
	// Grace is added to the model's rearm deadline before acting: the
	// owner gets this much more time to rearm itself.
	Grace Duration `json:"grace"`
	// Allow lists what may be touched; every non-empty list must match.
	Allow Allow `json:"allow"`
	// RateLimit bounds the actions (all QPs together, and per owner).
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

// Allow is the allowlist, matched against the QP's owner. At least one
// list must be non-empty; every non-empty list must match. Comms and pids
// are weak (any process sets its comm, pids are reused): prefer uids and
// cgroups (cgroups, units, pods).
type Allow struct {
	Devices []string `json:"devices"`
	Comms   []string `json:"comms"`
	PIDs    []uint32 `json:"pids"`
	// UIDs: the owner's real, effective and saved uids must all be listed.
	UIDs []uint32 `json:"uids"`
	// Cgroups: absolute cgroup paths; the owner's cgroup must be one of
	// them or below one.
	Cgroups []string `json:"cgroups"`
	// Units: systemd unit names (myapp.service); one must be a component
	// of the owner's cgroup path.
	Units []string `json:"units"`
	// Pods: Kubernetes pod UIDs; the owner's cgroup must be in one of
	// these pods (cgroupfs "pod<uid>" or systemd "...-pod<uid_with_underscores>.slice").
	Pods []string `json:"pods"`
}

// RateLimit allows Max actions per Per, and OwnerMax of them per owner
// (a process). OwnerMax 0 means half of Max, rounded up.
type RateLimit struct {
	Max      int      `json:"max"`
	Per      Duration `json:"per"`
	OwnerMax int      `json:"owner_max,omitempty"`
}

// ownerMax is the per-owner limit in effect.
func (r RateLimit) ownerMax() int {
	if r.OwnerMax > 0 {
		return r.OwnerMax
	}
	return (r.Max + 1) / 2
}

// Bounds of a policy (Validate).
const (
	maxRate      = 10000
	minRatePer   = time.Second
	maxRatePer   = 24 * time.Hour
	maxGrace     = time.Hour
	maxListItems = 1024
	maxPolicy    = 1 << 20 // bytes of a policy file
)

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
	PathBits  uint8  `json:"src_path_bits,omitempty"` // an LMC path: the SLID is the port's LID + these
}

// Path converts the spec (validated) to an AltPath.
func (s AltSpec) Path() (*AltPath, error) {
	if s.Port == 0 {
		return nil, errors.New("alt.port must be set")
	}
	if s.DLID == 0 && s.DGID == "" {
		return nil, errors.New("alt needs dlid or dgid")
	}
	if err := checkPathBitsField(s.PathBits); err != nil {
		return nil, fmt.Errorf("alt.%w", err)
	}
	p := &AltPath{Port: s.Port, PKeyIndex: s.PKeyIndex, Timeout: s.Timeout,
		Dest: Dest{DLID: s.DLID, SL: s.SL, PortNum: s.Port, SrcPathBits: s.PathBits}}
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
		// b is the value as written: maybe several lines, maybe long
		v := string(b[:min(len(b), 40)])
		if len(b) > len(v) {
			v += "..."
		}
		return fmt.Errorf("a duration is a string such as \"30s\": %s", escape.Text(v))
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

// LoadPolicy reads and validates a policy file (at most 1 MiB).
func LoadPolicy(path string) (Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return Policy{}, fmt.Errorf("reading policy: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPolicy+1))
	if err != nil {
		return Policy{}, fmt.Errorf("reading policy %s: %w", path, err)
	}
	if len(b) > maxPolicy {
		return Policy{}, fmt.Errorf("policy %s: larger than %d bytes", path, maxPolicy)
	}
	return ParsePolicy(b)
}

// ParsePolicy decodes and validates a policy. The JSON is strict: one
// object, no trailing data, no duplicate keys (a later key would silently
// win), no unknown fields.
func ParsePolicy(b []byte) (Policy, error) {
	if err := strictJSON(b); err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	p := DefaultPolicy()
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	return p, p.Validate()
}

// Effective applies the --enforce flag, the one switch to enforce mode:
// with it the mode is enforce; without it, monitor, and a file that asks
// for enforce gets a warning to log.
func (p Policy) Effective(enforceFlag bool) (Policy, string) {
	if enforceFlag {
		p.Mode = ModeEnforce
		return p, ""
	}
	if p.Mode == ModeEnforce {
		p.Mode = ModeMonitor
		return p, `the policy file says "mode": "enforce" but --enforce was not given: monitor mode (nothing is changed); --enforce is the one switch`
	}
	return p, ""
}

// Validate reports every problem in one line.
func (p Policy) Validate() error {
	var errs []string
	if p.Mode != ModeMonitor && p.Mode != ModeEnforce {
		errs = append(errs, fmt.Sprintf("mode must be monitor or enforce, not %q", p.Mode))
	}
	if p.Grace < 0 || time.Duration(p.Grace) > maxGrace {
		errs = append(errs, fmt.Sprintf("grace must be between 0 and %v", maxGrace))
	}
	errs = append(errs, p.Allow.validate()...)
	rl := p.RateLimit
	if rl.Max < 1 || rl.Max > maxRate {
		errs = append(errs, fmt.Sprintf("rate_limit.max must be between 1 and %d", maxRate))
	}
	if d := time.Duration(rl.Per); d < minRatePer || d > maxRatePer {
		errs = append(errs, fmt.Sprintf("rate_limit.per must be between %v and %v", minRatePer, maxRatePer))
	}
	if rl.OwnerMax < 0 || rl.OwnerMax > rl.Max {
		errs = append(errs, "rate_limit.owner_max must be between 0 (half of max) and max")
	}
	if len(p.Alternates) > maxListItems {
		errs = append(errs, fmt.Sprintf("alternates: more than %d", maxListItems))
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
