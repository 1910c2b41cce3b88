package apm

import (
	"sort"

	"github.com/apmwatch/apmwatch/event"
)

// reorder holds events for a bounded window of Boot time and releases them
// in Boot order. Events arrive nearly sorted (per-CPU streams interleave),
// so it is an insertion sort from the tail over a slice used as a queue:
// O(1) for an event already in order.
type reorder struct {
	window uint64
	buf    []*event.Event
	head   int
	max    uint64 // largest Boot pushed
	out    uint64 // Boot of the last released event
}

func (r *reorder) push(ev *event.Event) {
	r.max = max(r.max, ev.Boot)
	r.buf = append(r.buf, ev)
	i := len(r.buf) - 1
	for steps := 0; i > r.head && r.buf[i-1].Boot > ev.Boot; steps++ {
		if steps == 32 {
			// Far out of order (a hostile recording): find the place by
			// bisection and move the tail in one copy.
			j := r.head + sort.Search(i-r.head, func(k int) bool { return r.buf[r.head+k].Boot > ev.Boot })
			copy(r.buf[j+1:i+1], r.buf[j:i])
			i = j
			break
		}
		r.buf[i] = r.buf[i-1]
		i--
	}
	r.buf[i] = ev
}

// popOldest returns the oldest event whatever its Boot.
func (r *reorder) popOldest() (*event.Event, bool) {
	if r.head == len(r.buf) {
		return nil, false
	}
	return r.pop(^uint64(0))
}

// pop returns the oldest event whose Boot is at most limit.
func (r *reorder) pop(limit uint64) (*event.Event, bool) {
	if r.head == len(r.buf) || r.buf[r.head].Boot > limit {
		return nil, false
	}
	ev := r.buf[r.head]
	r.buf[r.head] = nil
	r.head++
	if r.head == len(r.buf) {
		r.buf = r.buf[:0]
		r.head = 0
	} else if r.head >= 1024 && r.head*2 >= len(r.buf) {
		n := copy(r.buf, r.buf[r.head:])
		clear(r.buf[n:])
		r.buf = r.buf[:n]
		r.head = 0
	}
	r.out = max(r.out, ev.Boot)
	return ev, true
}

func (r *reorder) len() int { return len(r.buf) - r.head }

// typedTwin reports whether the events held include, stamped at most
// within after boot, a typed copy (ib_core's or ib_uverbs', with its
// device) of the QP event typ on qpn.
func (r *reorder) typedTwin(qpn uint32, typ event.EventType, boot, within uint64) bool {
	for _, ev := range r.buf[r.head:] {
		if ev.Boot > boot+within {
			return false
		}
		if ev.QP != nil && ev.QPN == qpn && ev.QP.Type == typ && !ev.QP.Untyped(ev) {
			return true
		}
	}
	return false
}

// oldest is the Boot of the oldest event held.
func (r *reorder) oldest() (uint64, bool) {
	if r.head == len(r.buf) {
		return 0, false
	}
	return r.buf[r.head].Boot, true
}

// releaseLimit is the Boot up to which events can no longer be overtaken.
func (r *reorder) releaseLimit() uint64 {
	if r.max < r.window {
		return 0
	}
	return r.max - r.window
}
