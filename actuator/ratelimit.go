package actuator

import (
	"fmt"
	"time"
)

// rateMark is one action taken, by owner (a process: pid and start time).
type rateMark struct {
	at    time.Time
	owner string
}

// rateLimited forgets the actions older than the period and says why one
// more for own would exceed the policy's limits ("" when it would not):
// max for all QPs together, owner_max for one owner, so that one noisy
// owner cannot use up the actions the other QPs need.
func (e *Enforcer) rateLimited(now time.Time, own Owner) string {
	rl := e.Policy.RateLimit
	per := time.Duration(rl.Per)
	keep := e.recent[:0]
	mine := 0
	for _, m := range e.recent {
		if now.Sub(m.at) < per {
			keep = append(keep, m)
			if m.owner == own.id() {
				mine++
			}
		}
	}
	e.recent = keep
	if len(e.recent) >= rl.Max {
		return fmt.Sprintf("rate limit: %d actions in %v", len(e.recent), per)
	}
	if n := rl.ownerMax(); mine >= n {
		return fmt.Sprintf("rate limit per owner: %d actions on qps of pid %d in %v", mine, own.PID, per)
	}
	return ""
}
