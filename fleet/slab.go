package fleet

import (
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// endSlab holds the engine's ends by value in fixed-size chunks: an end
// holds no pointer (its peer is a slot), so the garbage collector never
// scans the millions of them, a chunk's address never moves (an *end
// stays valid while its slot is used), and the table grows a chunk at a
// time, never by copying (BenchmarkEngineMemory1M measures it).
type endSlab struct {
	chunks [][]end
	free   []uint32 // released slots, reused first
	used   uint32   // slots handed out from the chunks, free ones included
}

// slabChunk is the ends a chunk holds (128 KiB of ends).
const slabChunk = 1024

// at is the end in slot i.
func (s *endSlab) at(i uint32) *end { return &s.chunks[i/slabChunk][i%slabChunk] }

// alloc returns a free slot, zeroed.
func (s *endSlab) alloc() uint32 {
	if n := len(s.free); n > 0 {
		i := s.free[n-1]
		s.free = s.free[:n-1]
		return i
	}
	if int(s.used) == len(s.chunks)*slabChunk {
		s.chunks = append(s.chunks, make([]end, slabChunk))
	}
	s.used++
	return s.used - 1
}

// release zeroes slot i and keeps it for the next alloc.
func (s *endSlab) release(i uint32) {
	*s.at(i) = end{}
	s.free = append(s.free, i)
}

// noPeer is the peer slot of an unpaired end.
const noPeer = ^uint32(0)

// lookup is the end of key k, or nil.
func (g *Engine) lookup(k wire.EndKey) *end {
	_, e := g.lookupSlot(k)
	return e
}

// lookupSlot is the slot and end of key k, or nil.
func (g *Engine) lookupSlot(k wire.EndKey) (uint32, *end) {
	i, ok := g.ends.get(k, &g.slab)
	if !ok {
		return 0, nil
	}
	return i, g.slab.at(i)
}

// peerOf is e's peer, or nil.
func (g *Engine) peerOf(e *end) *end {
	if e.peer == noPeer {
		return nil
	}
	return g.slab.at(e.peer)
}

// eachEnd calls fn for every end, in no order.
func (g *Engine) eachEnd(fn func(e *end)) {
	g.ends.each(func(i uint32) { fn(g.slab.at(i)) })
}
