package fleet

import (
	"fmt"

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
	if e.open == 0 || e.peer == noPeer {
		return
	}
	g.closeWith(e, fmt.Sprintf("finding %d no longer holds: %s", e.openID(), why))
}

// kindOf is the kind a pair state is judged as.
func kindOf(s PairState) apm.Kind {
	if s == StateUnprotected {
		return apm.UnprotectedConnection
	}
	return apm.OneSidedRearm
}
