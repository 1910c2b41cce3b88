package fleet

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// Line is a fleet finding line: the finding line every output writes
// (findingline.Line, `host` and `qp` naming the end to fix) plus the other
// end and the connection.
type Line struct {
	findingline.Line
	Peer       *PeerEnd `json:"peer,omitempty"`
	Hosts      []string `json:"hosts"`      // both ends' hosts
	Connection string   `json:"connection"` // both ends' addresses and QPNs
	Partition  int      `json:"partition"`
}

// PeerEnd is the other end of a finding's connection.
type PeerEnd struct {
	Host   string `json:"host"`
	Device string `json:"device"`
	QPN    uint32 `json:"qpn"`
}

const (
	remedyOneSided = "rearm the end that did not: load a new alternate path on it and modify it RTS->RTS with PATH_MIG_STATE=REARM " +
		"(on its host: apmwatch actuate rearm); its peer's rearm takes effect only then"
	remedyUnprotected = "load a new alternate path on both ends and rearm both (RTS->RTS PATH_MIG_STATE=REARM); until then the next path failure breaks the connection"
)

// idOf derives a finding's ID from what it judges, so every instance and
// every restart gives one judgement the same ID (53 bits: exact in JSON
// numbers everywhere).
func idOf(parts ...string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(strings.Join(parts, "|")))
	id := h.Sum64() & (1<<53 - 1)
	if id == 0 {
		id = 1
	}
	return id
}

// order returns the pair's ends in a fixed order.
func (g *Engine) order(e *end) (a, b *end) {
	p := g.peerOf(e)
	if wire.Less(p.key, e.key) {
		return p, e
	}
	return e, p
}

func connName(a, b *end) string { return a.key.String() + " <-> " + b.key.String() }

// judge gives the pair's finding once per state episode: its ID names the
// kind, the connection and when each end last changed.
func (g *Engine) judge(e *end, s PairState, due int64) {
	a, b := g.order(e)
	kind := apm.UnprotectedConnection
	fix, other := a, b // the end the finding names, and its peer
	if s == StateOneSided {
		kind = apm.OneSidedRearm
		if a.armed {
			fix, other = b, a
		}
	}
	conn := connName(a, b)
	id := idOf(string(kind), conn, fmt.Sprint(a.since), fmt.Sprint(b.since))
	if e.open != 0 && e.openID() != id {
		g.closeOpen(e, fmt.Sprintf("a later judgement of the connection replaces it (%s, finding %d)", kind, id))
	}
	open := e.openID() == id
	a.open, b.open = openOf(id, s), openOf(id, s)
	if open || g.judged[id] {
		return
	}
	g.judged[id] = true
	first := time.Unix(0, max(a.since, b.since)).UTC()
	f := apm.Finding{ID: id, Kind: kind, Severity: sevOf(kind), QP: apm.Key{Device: g.names.name(fix.dev), QPN: fix.key.QPN()},
		PID: fix.pid, FirstTime: first, LastTime: time.Unix(0, due).UTC(),
		Evidence: []apm.Evidence{g.evidence(fix), g.evidence(other)}, Remediation: remedyUnprotected}
	switch kind {
	case apm.OneSidedRearm:
		f.Remediation = remedyOneSided
		f.Explanation = fmt.Sprintf("after a migration %s rearmed and its peer %s did not within %v (the stream's clock): the connection cannot fail over again "+
			"(REARM becomes ARMED only when packets come from a rearmed peer)", g.endName(other), g.endName(fix), g.cfg.Deadline)
	default:
		f.Explanation = fmt.Sprintf("neither %s nor its peer %s is armed, for %v (the stream's clock): the connection has no alternate path and the next path failure breaks it",
			g.endName(fix), g.endName(other), g.cfg.Deadline)
	}
	g.emit(g.line(f, fix, other, conn, a, b))
}

// resolve closes the pair's open finding: both ends armed again.
func (g *Engine) resolve(e *end) {
	a, b := g.order(e)
	g.closeWith(e, fmt.Sprintf("both %s and %s are armed again", g.endName(a), g.endName(b)))
}

// closeWith writes the resolution of the pair's open finding, once (its
// ID derives from the finding's), explained so.
func (g *Engine) closeWith(e *end, explanation string) {
	a, b := g.order(e)
	open, kind := e.openID(), kindOf(e.openState())
	a.open, b.open = 0, 0
	id := idOf("resolution", fmt.Sprint(open))
	if g.judged[id] {
		return
	}
	g.judged[id] = true
	now := time.Unix(0, max(a.at, b.at)).UTC()
	f := apm.Finding{ID: id, Kind: kind, Severity: apm.SevInfo, QP: apm.Key{Device: g.names.name(a.dev), QPN: a.key.QPN()},
		FirstTime: now, LastTime: now, Evidence: []apm.Evidence{g.evidence(a), g.evidence(b)}, Resolved: true, Resolves: open,
		Explanation: explanation}
	g.emit(g.line(f, a, b, connName(a, b), a, b))
}

func (g *Engine) line(f apm.Finding, fix, other *end, conn string, a, b *end) Line {
	return Line{Line: findingline.New(f, g.names.name(fix.host)),
		Peer:  &PeerEnd{Host: g.names.name(other.host), Device: g.names.name(other.dev), QPN: other.key.QPN()},
		Hosts: []string{g.names.name(a.host), g.names.name(b.host)}, Connection: conn, Partition: g.cfg.Partition(a.key, b.key)}
}

func sevOf(k apm.Kind) apm.Severity {
	if i, ok := apm.Info(k); ok {
		return i.Severity
	}
	return apm.SevError
}

func (g *Engine) endName(e *end) string {
	return fmt.Sprintf("%s %s QP %d", g.names.name(e.host), g.names.name(e.dev), e.key.QPN())
}

// evidence says what one end's record shows.
func (g *Engine) evidence(e *end) apm.Evidence {
	var w strings.Builder
	fmt.Fprintf(&w, "%s (%s):", g.endName(e), e.key)
	if e.migrated != 0 {
		fmt.Fprintf(&w, " migrated at %s,", stamp(e.migrated))
	}
	switch {
	case e.rearm != 0:
		fmt.Fprintf(&w, " rearmed at %s", stamp(e.rearm))
	case e.armed:
		w.WriteString(" armed")
	case e.migrated != 0:
		w.WriteString(" no rearm since")
	default:
		w.WriteString(" not armed")
	}
	if m := e.migState(); m != 0 {
		fmt.Fprintf(&w, "; rdma netlink read %s at %s", event.MigState(m-1), stamp(e.migRead))
	}
	fmt.Fprintf(&w, "; record of %s", stamp(e.at))
	return apm.Evidence{What: w.String()}
}

func stamp(ns int64) string {
	if ns == 0 {
		return "?"
	}
	return time.Unix(0, ns).UTC().Format("15:04:05.000")
}

func parseMig(s string) (uint8, bool) {
	for _, m := range []event.MigState{event.MigMigrated, event.MigRearm, event.MigArmed} {
		if m.String() == s {
			return uint8(m), true
		}
	}
	return 0, false
}
