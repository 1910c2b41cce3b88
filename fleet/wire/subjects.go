package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// Leases say which instance judges a share (the partitions p with
// p % N == s) now. They live in a JetStream KV bucket whose TTL is the
// lease's: a lease its holder stops renewing is gone from the bucket one
// TTL after its last renewal. JetStream's revision check is the only
// arbiter: a lease is taken with Create (only when the key holds
// nothing, so of the instances that try one wins), renewed and given up
// with the revision its holder last wrote (a key another revision wrote
// since is not the holder's any more).
//
//	share.<s>  the lease of share s: {"instance":i,"run":...}
//	home.<s>   share s's home instance is running (renewed as leases are):
//	           whoever holds the share for it gives it back

// LeaseBucket is the KV bucket of the leases.
const LeaseBucket = "APMWATCH_LEASES"

// Stream names and subjects (see doc.go).
const (
	ConnStream     = "APMWATCH_CONN"
	FindingsStream = "APMWATCH_FINDINGS"

	ConnPrefix        = "apmwatch.conn."
	HostFindingPrefix = "apmwatch.finding.host."
	FleetFindingPfx   = "apmwatch.finding.fleet."
)

// Token makes a host or device name one subject token: anything but
// letters, digits, '-' and '_' becomes '_' (dots, spaces and wildcards
// would split or widen the subject); the record keeps the real name.
func Token(s string) string {
	if s == "" {
		return "_"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	if isTokenBytes(s) {
		return s // every name a host gives is one: a rune at a time only when not
	}
	return strings.Map(func(r rune) rune {
		if r < 0x80 && tokenByte(byte(r)) {
			return r
		}
		return '_'
	}, s)
}

func tokenByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_'
}

// isTokenBytes reports whether every byte of s may stand in a token.
func isTokenBytes(s string) bool {
	for i := range len(s) {
		if !tokenByte(s[i]) {
			return false
		}
	}
	return true
}

// ConnSubject is where the records of one end go.
func ConnSubject(c *Conn) string {
	return fmt.Sprintf("%s%d.%s.%s.%d", ConnPrefix, c.Partition(), Token(c.Host), Token(c.Device), c.Local.QPN)
}

// ConnFilter is the subject filter of one partition's records.
func ConnFilter(p int) string { return fmt.Sprintf("%s%d.>", ConnPrefix, p) }

// HostFindingSubject is where a host's finding lines go.
func HostFindingSubject(host string) string { return HostFindingPrefix + Token(host) }

// FleetFindingSubject is where an instance's findings on one partition go.
func FleetFindingSubject(p int) string { return fmt.Sprintf("%s%d", FleetFindingPfx, p) }

// MsgKind is what a queued message is, told by its subject: past its
// bound the publish queue drops connection records before finding lines.
type MsgKind uint8

const (
	KindConn MsgKind = iota + 1
	KindFinding
)

// OwnSubject reports whether subject is one that the host named host
// publishes, exactly as ConnSubject and HostFindingSubject write them,
// and its kind:
//
//	apmwatch.conn.<partition>.<host>.<device>.<qpn>
//	apmwatch.finding.host.<host>
//
// with <host> this host's token, <partition> below Partitions, <device>
// a token and <qpn> a 32-bit number (decimal, no leading zero). Anything
// else (another host's name, the fleet's findings, JetStream's API, a
// wildcard) is not this host's to send, whatever a queue file says.
func OwnSubject(subject, host string) (MsgKind, bool) {
	if rest, ok := strings.CutPrefix(subject, HostFindingPrefix); ok && rest == Token(host) {
		return KindFinding, true
	}
	if cs, ok := ParseConnSubject(subject); ok && cs.Host == Token(host) {
		return KindConn, true
	}
	return 0, false
}

// connSubject is what a connection subject names.
type connSubject struct {
	Partition    int
	Host, Device string // tokens
	Qpn          uint32
}

// ParseConnSubject parses a connection subject exactly as ConnSubject
// writes one: apmwatch.conn.<partition>.<host>.<device>.<qpn>, the
// partition below Partitions, host and device tokens, the QPN a 32-bit
// number (decimal, no leading zero).
func ParseConnSubject(subject string) (connSubject, bool) {
	rest, ok := strings.CutPrefix(subject, ConnPrefix)
	if !ok {
		return connSubject{}, false
	}
	f := strings.Split(rest, ".")
	if len(f) != 4 || !isToken(f[1]) || !isToken(f[2]) {
		return connSubject{}, false
	}
	p, ok1 := decimal(f[0])
	q, ok2 := decimal(f[3])
	if !ok1 || !ok2 || p >= Partitions {
		return connSubject{}, false
	}
	return connSubject{Partition: int(p), Host: f[1], Device: f[2], Qpn: uint32(q)}, true
}

// SubjectPartition is the partition a connection subject names (its
// first token after the prefix), without looking at the rest.
func SubjectPartition(subject string) (int, bool) {
	rest, ok := strings.CutPrefix(subject, ConnPrefix)
	if !ok {
		return 0, false
	}
	p, _, _ := strings.Cut(rest, ".")
	n, ok := decimal(p)
	if !ok || n >= Partitions {
		return 0, false
	}
	return int(n), true
}

// isToken reports whether s is what token makes of a name.
func isToken(s string) bool { return s != "" && len(s) <= 64 && isTokenBytes(s) }

// decimal parses a 32-bit number as %d writes it.
func decimal(s string) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	return n, err == nil && strconv.FormatUint(n, 10) == s
}
