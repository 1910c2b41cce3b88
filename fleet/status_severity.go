package fleet

import "github.com/apmwatch/apmwatch/apm"

// The severity of what `fleet status` shows, for --fail-on: each row as
// the finding the fleet gives on it (TestStatusSeverity).
//   - one-sided: one-sided-rearm's; unprotected: unprotected-connection's
//     (both error: the next failure of the primary breaks the connection);
//   - half-armed: warning (one end never armed: no migration has come, so
//     no finding yet, but the first one cannot be survived);
//   - a silent host: host-silent's (error): what its ends say is unknown.

// Severity is the row's severity.
func (r StatusRow) Severity() apm.Severity {
	switch r.State {
	case StateOneSided.String():
		return kindSeverity(apm.OneSidedRearm)
	case StateUnprotected.String():
		return kindSeverity(apm.UnprotectedConnection)
	}
	return apm.SevWarning
}

// AtOrAbove counts the rows and silent hosts of severity sev or worse.
func (s *Status) AtOrAbove(sev apm.Severity) int {
	n := 0
	for _, r := range s.Rows {
		if r.Severity() >= sev {
			n++
		}
	}
	if kindSeverity(apm.HostSilent) >= sev {
		for _, h := range s.Hosts {
			if h.Silent {
				n++
			}
		}
	}
	return n
}

// kindSeverity is a kind's severity from the one registry.
func kindSeverity(k apm.Kind) apm.Severity {
	info, _ := apm.Info(k)
	return info.Severity
}
