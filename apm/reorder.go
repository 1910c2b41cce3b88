package apm

import "github.com/apmwatch/apmwatch/event"

// item is one input waiting in the reorder stage: an event, or (rarely)
// another input. It stays three words: the stage moves items around.
type item struct {
	boot uint64
	ev   *event.Event
	in   *input
}

// input is a ground-truth reading, a CM mark or a gone QP.
type input struct {
	truth Truth
	key   event.QPKey
	op    uint8
}

const (
	opTruth uint8 = iota
	opMarkCM
	opGone
)

// reorder holds inputs for a bounded window of Boot time and releases them
// in Boot order. Inputs arrive nearly sorted (per-CPU streams interleave), so
// it is an insertion sort from the tail over a slice used as a queue: O(1)
// for an input already in order.
type reorder struct {
	window uint64
	buf    []item
	head   int
	max    uint64 // largest Boot pushed
	out    uint64 // Boot of the last released input
}

func (r *reorder) push(it item) {
	if it.boot > r.max {
		r.max = it.boot
	}
	r.buf = append(r.buf, it)
	i := len(r.buf) - 1
	for i > r.head && r.buf[i-1].boot > it.boot {
		r.buf[i] = r.buf[i-1]
		i--
	}
	r.buf[i] = it
}

// pop returns the oldest input whose Boot is at most limit.
func (r *reorder) pop(limit uint64) (item, bool) {
	if r.head == len(r.buf) || r.buf[r.head].boot > limit {
		return item{}, false
	}
	it := r.buf[r.head]
	r.buf[r.head] = item{}
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
	if it.boot > r.out {
		r.out = it.boot
	}
	return it, true
}

func (r *reorder) len() int { return len(r.buf) - r.head }

// releaseLimit is the Boot up to which inputs can no longer be overtaken.
func (r *reorder) releaseLimit() uint64 {
	if r.max < r.window {
		return 0
	}
	return r.max - r.window
}
