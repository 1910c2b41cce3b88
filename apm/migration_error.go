package apm

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
)

// migration-error: PATH_MIG_ERR, the HCA tried the alternate and it failed;
// the QP stays on its failing primary with no protection. One finding until
// the next rearm.

const remedyMigErr = "the alternate path is bad: choose a working path, send a LAP with it, load it as the new alternate and rearm; the QP has no failover until then"

func (m *Model) migrationError(q *qp, ev *event.Event) {
	if q.flags&fMigErrDone != 0 {
		return
	}
	q.flags |= fMigErrDone
	f := Finding{Kind: MigrationError, Remediation: remedyMigErr, First: ev.Boot, Last: ev.Boot,
		Evidence:    []Evidence{evd(refOf(ev), "PATH_MIG_ERR")},
		Explanation: fmt.Sprintf("PATH_MIG_ERR: migration to the alternate path (%s) failed, the QP is unprotected", q.alt)}
	if q.rearm.ok() && q.rearm.boot <= ev.Boot {
		f.Evidence = append([]Evidence{evd(q.rearm, "last rearm")}, f.Evidence...)
	}
	m.emit(q, f)
}
