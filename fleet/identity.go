package fleet

import (
	"fmt"
	"sort"

	"github.com/apmwatch/apmwatch/connid"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// identity is an end as the pairing rule (connid.Match, the postmortem's
// too) sees it: its QPN and its port's address (the local key: a GID, or
// the subnet prefix and LID, from sysfs on its host), the QPN and address
// its path leads to (the remote key). A record from an older publisher or
// of a QP whose path was not seen loaded lacks an address: it pairs with
// nothing ("no path identity").
func (g *Engine) identity(e *end) connid.End {
	return connid.End{Name: g.endName(e), QPN: e.key.QPN(), DestQPN: e.remote.QPN(), Paths: keyAddr(e.remote), Ports: keyAddr(e.key)}
}

func keyAddr(k wire.EndKey) []connid.Addr {
	if k.Addr == [16]byte{} {
		return nil
	}
	return []connid.Addr{connid.GIDAddr(k.Addr)}
}

// pairs reports whether e and p are the two ends of one connection.
func (g *Engine) pairs(e, p *end) bool {
	return p != e && g.unpairedWhy(e, p) == ""
}

// unpairedWhy says why e and p, whose keys lead to each other, are not
// taken as one connection ("": they are): the identity rule, or ports of
// different LMCs (each took the other's DLID to its LMC range's base by
// its own LMC: that leads to the other port only by chance).
func (g *Engine) unpairedWhy(e, p *end) string {
	if e.lmc() != p.lmc() {
		return fmt.Sprintf("their ports' LMCs differ (%d and %d): a path's DLID is taken to a port by the local LMC", e.lmc(), p.lmc())
	}
	return connid.Match(g.identity(e), g.identity(p))
}

// Unconfirmed is an end whose QPN and path point at another end that the
// identity rule does not confirm (connid's why): no two-sided finding is
// judged on them.
type Unconfirmed struct {
	A   PeerEnd `json:"a"`
	B   PeerEnd `json:"b"`
	Why string  `json:"why"`
}

// maxUnconfirmedShown bounds the unconfirmed ends a status lists (all are
// counted).
const maxUnconfirmedShown = 100

// unconfirmedRows lists the unpaired ends whose path and QPN lead to
// another unpaired end that the rule refuses.
func (g *Engine) unconfirmedRows() (rows []Unconfirmed, n int) {
	g.eachEnd(func(e *end) {
		if e.peer != noPeer || !e.remote.Valid() {
			return
		}
		p := g.lookup(e.remote)
		if p == nil || p == e || p.peer != noPeer {
			return
		}
		why := g.unpairedWhy(e, p)
		if why == "" {
			return
		}
		n++
		if len(rows) < maxUnconfirmedShown {
			rows = append(rows, Unconfirmed{A: g.peerEnd(e), B: g.peerEnd(p), Why: why})
		}
	})
	sort.Slice(rows, func(i, j int) bool { return rows[i].A.less(rows[j].A) })
	return rows, n
}

func (g *Engine) peerEnd(e *end) PeerEnd {
	return PeerEnd{Host: g.names.name(e.host), Device: g.names.name(e.dev), QPN: e.key.QPN()}
}

func (a PeerEnd) less(b PeerEnd) bool {
	if a.Host != b.Host {
		return a.Host < b.Host
	}
	if a.Device != b.Device {
		return a.Device < b.Device
	}
	return a.QPN < b.QPN
}
