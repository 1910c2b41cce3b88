package apm

import "fmt"

// Kind names a finding. The strings are an interface (JSON "kind", filters,
// metrics labels, docs/findings.md): keep them.
type Kind string

// The finding kinds: the model's rules (one file each, see doc.go), the
// two-sided judgement of paired recordings, and what the actuator reports.
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
	// UnprotectedFailure: the connection was lost while the QP had no valid
	// armed alternate.
	UnprotectedFailure Kind = "unprotected-failure"

	OneSidedRearm Kind = "one-sided-rearm" // postmortem pairing of two recordings, and the fleet live

	UnprotectedConnection Kind = "unprotected-connection" // the fleet: neither end of a connection armed

	HostSilent Kind = "host-silent" // the fleet: a host that heartbeats has not been heard past --silent-after

	Actuated         Kind = "actuated"      // the actuator rearmed the QP and verified it
	WouldActuate     Kind = "would-actuate" // monitor mode: what enforce would have done
	ActuationSkipped Kind = "actuation-skipped"
	ActuationFailed  Kind = "actuation-failed"
)

// Origin of a kind: who judges it.
const (
	ByModel    = "model"
	ByPairing  = "pairing"
	ByActuator = "actuator"
	ByFleet    = "fleet"
)

// KindInfo is the registry entry of one kind.
type KindInfo struct {
	Kind     Kind
	By       string   // ByModel, ByPairing, ByFleet or ByActuator
	Severity Severity // of a new finding of this kind (resolutions are info)
	Rule     string   // the file of package apm that decides it, for the model's kinds
}

// registry is the one list of finding kinds, in documentation order.
var registry = []KindInfo{
	{MissedRearm, ByModel, SevError, "missed_rearm.go"},
	{RearmWithoutAlt, ByModel, SevWarning, "rearm_alt.go"},
	{LAPRace, ByModel, SevError, "lap_race.go"},
	{MigStateMismatch, ByModel, SevWarning, "mismatch.go"},
	{MigrationError, ByModel, SevCritical, "migration_error.go"},
	{Flapping, ByModel, SevWarning, "flapping.go"},
	{APMModifyFailed, ByModel, SevWarning, "modify_failed.go"},
	{NeverArmed, ByModel, SevWarning, "never_armed.go"},
	{CMNotNotified, ByModel, SevError, "cm_notify.go"},
	{StuckRearm, ByModel, SevWarning, "stuck_rearm.go"},
	{UnprotectedFailure, ByModel, SevCritical, "unprotected_failure.go"},
	{OneSidedRearm, ByPairing, SevError, ""},
	{UnprotectedConnection, ByFleet, SevError, ""},
	{HostSilent, ByFleet, SevError, ""},
	{Actuated, ByActuator, SevInfo, ""},
	{WouldActuate, ByActuator, SevInfo, ""},
	{ActuationSkipped, ByActuator, SevWarning, ""},
	{ActuationFailed, ByActuator, SevError, ""},
}

// Kinds lists every finding kind in documentation order.
func Kinds() []Kind {
	out := make([]Kind, len(registry))
	for i, k := range registry {
		out[i] = k.Kind
	}
	return out
}

// Registry returns the registry entries in documentation order.
func Registry() []KindInfo { return append([]KindInfo(nil), registry...) }

// Info returns the registry entry of k.
func Info(k Kind) (KindInfo, bool) {
	for _, e := range registry {
		if e.Kind == k {
			return e, true
		}
	}
	return KindInfo{}, false
}

// ParseKind checks a kind name.
func ParseKind(s string) (Kind, error) {
	if e, ok := Info(Kind(s)); ok {
		return e.Kind, nil
	}
	return "", fmt.Errorf("unknown finding kind %q", s)
}
