package postmortem

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/output"
)

// pathText names where a path goes: port, remote LID and, on a global
// route, the remote GID.
func pathText(p *event.Path) string {
	if p == nil {
		return "-"
	}
	s := fmt.Sprintf("port %d dlid 0x%x", p.Port, p.DLID)
	if p.IsGlobal {
		s += " dgid " + output.GID(p.DGID)
	}
	return s
}
