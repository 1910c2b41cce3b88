package fleet

import "github.com/apmwatch/apmwatch/connid"

// identity is an end as the pairing rule (connid.Match, the postmortem's
// too) sees it: its QPN and its port's address (the local key: a GID, or
// the subnet prefix and LID, from sysfs on its host), the QPN and address
// its path leads to (the remote key). A record from an older publisher or
// of a QP whose path was not seen loaded lacks an address: it pairs with
// nothing ("no path identity").
func (g *Engine) identity(e *end) connid.End {
	return connid.End{Name: g.endName(e), QPN: e.key.QPN(), DestQPN: e.remote.QPN(), Paths: keyAddr(e.remote), Ports: keyAddr(e.key)}
}

func keyAddr(k EndKey) []connid.Addr {
	if k.Addr == [16]byte{} {
		return nil
	}
	return []connid.Addr{connid.GIDAddr(k.Addr)}
}

// pairs reports whether e and p are the two ends of one connection.
func (g *Engine) pairs(e, p *end) bool {
	return p != e && connid.Match(g.identity(e), g.identity(p)) == ""
}
