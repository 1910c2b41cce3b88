package fleet

import (
	"testing"

	"github.com/apmwatch/apmwatch/apm"
)

// Each row counts at the severity of the finding the fleet gives on it; a
// silent host at host-silent's.
func TestStatusSeverity(t *testing.T) {
	s := &Status{Rows: []StatusRow{{State: "one-sided"}, {State: "unprotected"}, {State: "half-armed"}},
		Hosts: []HostClock{{Host: "a"}, {Host: "b", Silent: true}}}
	for _, c := range []struct {
		sev  apm.Severity
		want int
	}{{apm.SevInfo, 4}, {apm.SevWarning, 4}, {apm.SevError, 3}, {apm.SevCritical, 0}} {
		if got := s.AtOrAbove(c.sev); got != c.want {
			t.Errorf("at or above %s: %d, want %d", c.sev, got, c.want)
		}
	}
	if n := (&Status{}).AtOrAbove(apm.SevInfo); n != 0 {
		t.Errorf("an empty status counts %d", n)
	}
}
