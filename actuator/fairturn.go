package actuator

import (
	"cmp"
	"slices"
	"time"
)

// The queue's turns are shared between processes: when the limit admits
// fewer actions than wait, the processes take turns, the one served least
// recently first (one never served before all), one action each, then a
// second of each, and so on; each process's own actions keep the queue's
// order. So a process with many QPs due first cannot hold another
// process's QP back for more than one turn of each process waiting: its
// QPs are paced by its own share, not by the others' backlog. A process
// here is the finding's pid (the owner lookup, which names pid and start
// time, runs only at an action's turn); it orders turns and grants
// nothing.

// fairOrder returns the indices of the queue in the order the limit
// considers them.
func (e *Enforcer) fairOrder() []int {
	byPID := map[uint32][]int{}
	var pids []uint32
	for i, p := range e.queue {
		if _, ok := byPID[p.f.PID]; !ok {
			pids = append(pids, p.f.PID)
		}
		byPID[p.f.PID] = append(byPID[p.f.PID], i)
	}
	// least recently served first; ties in the order of their first action
	slices.SortStableFunc(pids, func(a, b uint32) int { return cmp.Compare(e.served[a].UnixNano(), e.served[b].UnixNano()) })
	order := make([]int, 0, len(e.queue))
	for round := 0; len(order) < len(e.queue); round++ {
		for _, pid := range pids {
			if ix := byPID[pid]; round < len(ix) {
				order = append(order, ix[round])
			}
		}
	}
	return order
}

// servedNow records that pid's action was admitted at now.
func (e *Enforcer) servedNow(pid uint32, now time.Time) {
	if e.served == nil {
		e.served = map[uint32]time.Time{}
	}
	e.served[pid] = now
}

// forgetServed forgets the processes that have no action waiting and were
// last served two periods of the limit ago or more: the map holds at most
// the processes waiting and those the limit admitted lately.
func (e *Enforcer) forgetServed(now time.Time) {
	keep := 2 * time.Duration(e.Policy.RateLimit.Per)
	waiting := map[uint32]bool{}
	for _, l := range [][]pendingAct{e.pending, e.queue} {
		for _, p := range l {
			waiting[p.f.PID] = true
		}
	}
	for pid, at := range e.served {
		if !waiting[pid] && now.Sub(at) >= keep {
			delete(e.served, pid)
		}
	}
}
