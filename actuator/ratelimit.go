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

// limiter is the policy's rate limit at one instant: max actions in the
// period for all QPs together, owner_max for the QPs of one owner (so that
// one noisy owner cannot use up the actions the other QPs need). It counts
// the actions taken within the period and those held: admitted by the
// queue, their owner lookup and checks still running. Monitor mode sends
// nothing, so it paces nothing (off).
type limiter struct {
	off           bool
	per           time.Duration
	max, ownerMax int
	marks         []time.Time            // within the period, oldest first
	mine          map[string][]time.Time // the same by owner
	held          int
	heldBy        map[string]int // by owner; "": not looked up yet
}

// limiter forgets the actions older than the period and returns the limit
// as it stands at now.
func (e *Enforcer) limiter(now time.Time) *limiter {
	rl := e.Policy.RateLimit
	l := &limiter{off: e.Policy.Mode != ModeEnforce, per: time.Duration(rl.Per), max: rl.Max, ownerMax: rl.ownerMax(),
		mine: map[string][]time.Time{}, heldBy: map[string]int{}}
	keep := e.recent[:0]
	for _, m := range e.recent {
		if now.Sub(m.at) < l.per {
			keep = append(keep, m)
			l.marks = append(l.marks, m.at)
			l.mine[m.owner] = append(l.mine[m.owner], m.at)
		}
	}
	e.recent = keep
	for _, o := range e.held {
		l.hold(o)
	}
	return l
}

// check says why one more action on a QP of owner ("": not looked up yet,
// the limit for all QPs only) would exceed the limit ("" when it would
// not) and when both limits admit it again; known false when only the
// actions held can make room (once they end).
func (l *limiter) check(owner string) (why string, next time.Time, known bool) {
	if l.off {
		return "", time.Time{}, true
	}
	known = true
	if n := len(l.marks) + l.held; n >= l.max {
		why = fmt.Sprintf("rate limit: %d actions in %v", n, l.per)
		next, known = l.freed(l.marks, n-l.max)
	}
	if mine := l.mine[owner]; owner != "" {
		if n := len(mine) + l.heldBy[owner]; n >= l.ownerMax {
			if why == "" {
				why = fmt.Sprintf("rate limit per owner: %d actions on the qps of process %s (pid@start) in %v", n, owner, l.per)
			}
			t, ok := l.freed(mine, n-l.ownerMax)
			if t.After(next) {
				next = t
			}
			known = known && ok
		}
	}
	return why, next, known
}

// freed is when marks[k] leaves the period: the count (marks and held) is
// under its limit again once the marks up to k have left. ok false when k
// is past the marks: only held actions ending can make room.
func (l *limiter) freed(marks []time.Time, k int) (time.Time, bool) {
	if k >= len(marks) {
		return time.Time{}, false
	}
	return marks[k].Add(l.per), true
}

// hold counts an action admitted whose owner is being looked up.
func (l *limiter) hold(owner string) {
	l.held++
	l.heldBy[owner]++
}
