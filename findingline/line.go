package findingline

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/apmwatch/apmwatch/apm"
)

// Schema is the version of the finding's JSON shape, written in every line
// as "schema". A version only adds fields; one that removes or changes a
// field is a new number.
const Schema = 1

// Line types ("type").
const (
	TypeFinding    = "finding"
	TypeResolution = "resolution"
)

// Line is a finding or a resolution as every output writes it: the
// model's apm.Finding (its fields inline: "kind", "qp", "first_boot_ns",
// ...) with what names it in any stream. "finding" is the finding kind
// under the name that means the same in every output; "kind" keeps it too
// in every output but trace's stream, where "kind" names the line's kind
// among the events (docs/events.md, "Findings").
type Line struct {
	Schema      int       `json:"schema"`
	Type        string    `json:"type"`              // TypeFinding or TypeResolution
	FindingKind apm.Kind  `json:"finding"`           // the finding kind
	Logged      time.Time `json:"logged,omitzero"`   // when a daemon wrote it (audit, fleet)
	Host        string    `json:"host"`              // the host whose QP it judges
	Bundle      string    `json:"bundle,omitempty"`  // audit: the incident bundle that holds it
	BootID      string    `json:"boot_id,omitempty"` // audit: the boot of the host the QP lived in
	ErrnoName   string    `json:"errno_name,omitempty"`
	apm.Finding
}

// New returns f's line as host writes it: the type from f.Resolved, the
// errno's name, evidence never null.
func New(f apm.Finding, host string) Line {
	l := Line{Schema: Schema, Type: TypeFinding, FindingKind: f.Kind, Host: host, Finding: f}
	if f.Resolved {
		l.Type = TypeResolution
	}
	if f.Errno > 0 {
		l.ErrnoName = unix.ErrnoName(syscall.Errno(f.Errno))
	}
	if l.Evidence == nil {
		l.Evidence = []apm.Evidence{}
	}
	return l
}
