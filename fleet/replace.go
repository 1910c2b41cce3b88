package fleet

import (
	"fmt"
	"time"

	"github.com/apmwatch/apmwatch/apm"
)

// A pair's open finding is closed by a resolution line whenever what it
// said stops being the pair's state: both ends armed again (resolve), a
// later judgement of the pair that replaces it (another kind, or a new
// episode), the pair's ends parting (an end gone, or connected
// elsewhere), or its ends showing no migration any more. None stays open
// for ever.

// closeOpen gives the resolution of the pair's open finding, saying why.
func (g *Engine) closeOpen(e *end, why string) {
	if e.open == 0 || e.peer == nil {
		return
	}
	a, b := order(e)
	open, kind := e.open, kindOf(e.openState)
	e.open, e.peer.open = 0, 0
	id := idOf("resolution", fmt.Sprint(open))
	if g.judged[id] {
		return
	}
	g.judged[id] = true
	now := time.Unix(0, max(a.at, b.at)).UTC()
	f := apm.Finding{ID: id, Kind: kind, Severity: apm.SevInfo, QP: apm.Key{Device: g.names.name(a.dev), QPN: a.key.QPN()},
		FirstTime: now, LastTime: now, Evidence: []apm.Evidence{g.evidence(a), g.evidence(b)}, Resolved: true, Resolves: open,
		Explanation: fmt.Sprintf("finding %d no longer holds: %s", open, why)}
	g.emit(g.line(f, a, b, connName(a, b), a, b))
}

// kindOf is the kind a pair state is judged as.
func kindOf(s PairState) apm.Kind {
	if s == StateUnprotected {
		return apm.UnprotectedConnection
	}
	return apm.OneSidedRearm
}
