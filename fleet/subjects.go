package fleet

import (
	"fmt"
	"strings"
)

// Stream names and subjects (see doc.go).
const (
	ConnStream     = "APMWATCH_CONN"
	FindingsStream = "APMWATCH_FINDINGS"

	connPrefix        = "apmwatch.conn."
	hostFindingPrefix = "apmwatch.finding.host."
	fleetFindingPfx   = "apmwatch.finding.fleet."
)

// token makes a host or device name one subject token: anything but
// letters, digits, '-' and '_' becomes '_' (dots, spaces and wildcards
// would split or widen the subject); the record keeps the real name.
func token(s string) string {
	if s == "" {
		return "_"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// ConnSubject is where the records of one end go.
func ConnSubject(c *Conn) string {
	return fmt.Sprintf("%s%d.%s.%s.%d", connPrefix, c.Partition(), token(c.Host), token(c.Device), c.Local.QPN)
}

// connFilter is the subject filter of one partition's records.
func connFilter(p int) string { return fmt.Sprintf("%s%d.>", connPrefix, p) }

// HostFindingSubject is where a host's finding lines go.
func HostFindingSubject(host string) string { return hostFindingPrefix + token(host) }

// fleetFindingSubject is where an instance's findings on one partition go.
func fleetFindingSubject(p int) string { return fmt.Sprintf("%s%d", fleetFindingPfx, p) }

// msgKind is what a queued message is, told by its subject: past its
// bound the publish queue drops connection records before finding lines.
type msgKind uint8

const (
	kindOther msgKind = iota
	kindConn
	kindFinding
)

// subjectKind tells a message's kind by its subject.
func subjectKind(subject string) msgKind {
	switch {
	case strings.HasPrefix(subject, connPrefix):
		return kindConn
	case strings.HasPrefix(subject, "apmwatch.finding."):
		return kindFinding
	}
	return kindOther
}
