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
// owner cannot use up the actions the other QPs need. When it would, next
// is the earliest time both limits can admit it again.
func (e *Enforcer) rateLimited(now time.Time, own Owner) (why string, next time.Time) {
	rl := e.Policy.RateLimit
	per := time.Duration(rl.Per)
	keep := e.recent[:0]
	var mine []time.Time
	for _, m := range e.recent {
		if now.Sub(m.at) < per {
			keep = append(keep, m)
			if m.owner == own.id() {
				mine = append(mine, m.at)
			}
		}
	}
	e.recent = keep
	// The marks are in time order: the limit admits again once the mark
	// len-limit has left the period.
	if n := len(e.recent); n >= rl.Max {
		why = fmt.Sprintf("rate limit: %d actions in %v", n, per)
		next = e.recent[n-rl.Max].at.Add(per)
	}
	if n, lim := len(mine), rl.ownerMax(); n >= lim {
		if why == "" {
			why = fmt.Sprintf("rate limit per owner: %d actions on qps of pid %d in %v", n, own.PID, per)
		}
		if t := mine[n-lim].Add(per); t.After(next) {
			next = t
		}
	}
	return why, next
}
