package apm

import "math/bits"

// chunkBits sizes the slab chunks: a plain slice would waste up to a quarter
// of its capacity on growth, chunks waste at most one chunk.
const chunkBits = 10

const chunkLen = 1 << chunkBits

// store keeps the QPs in chunked slabs indexed by int32, and an index from
// (device, qpn) to slot. Slots are handed out lowest chunk first, so live
// QPs stay packed in the low chunks; a chunk whose last QP is freed is given
// back to the Go heap, and the index is rebuilt once it has shrunk to a
// quarter of its peak (Go maps never shrink). After a million QPs come and
// go, what is left is what the live ones need. A stale timer for a freed
// slot is harmless: at returns nil for a released chunk, and a freed slot
// has timerAt 0.
type store struct {
	index  map[uint64]int32
	peak   int // index size since it was last rebuilt
	chunks []*chunk
	spare  []*chunk // emptied chunks kept for reuse, at most maxSpare
	hint   int      // no chunk below hint has a free slot
}

// maxSpare empty chunks (about 128 KiB each) are kept instead of being
// given back at once, so that QPs coming and going around a chunk boundary
// do not allocate a chunk every time.
const maxSpare = 4

// chunk is one slab. The QPs are their own allocation: 1024 of them fill
// whole pages, with nothing of the bitmap spilling into another page.
type chunk struct {
	qps  []qp
	used [chunkLen / 64]uint64
	live int
}

func newStore() *store { return &store{index: make(map[uint64]int32)} }

// at returns the QP in slot, or nil when the slot's chunk was released.
func (s *store) at(slot int32) *qp {
	i := int(slot >> chunkBits)
	if slot < 0 || i >= len(s.chunks) || s.chunks[i] == nil {
		return nil
	}
	return &s.chunks[i].qps[slot&(chunkLen-1)]
}

func (s *store) lookup(key uint64) (int32, bool) {
	slot, ok := s.index[key]
	return slot, ok
}

func (s *store) alloc(key uint64) int32 {
	i := s.hint
	for ; i < len(s.chunks); i++ {
		if c := s.chunks[i]; c == nil || c.live < chunkLen {
			break
		}
	}
	if i == len(s.chunks) {
		s.chunks = append(s.chunks, nil)
	}
	if s.chunks[i] == nil {
		if n := len(s.spare); n > 0 {
			s.chunks[i], s.spare = s.spare[n-1], s.spare[:n-1]
		} else {
			s.chunks[i] = &chunk{qps: make([]qp, chunkLen)}
		}
	}
	s.hint = i
	c := s.chunks[i]
	for w, u := range c.used {
		if u == ^uint64(0) {
			continue
		}
		b := bits.TrailingZeros64(^u)
		c.used[w] |= 1 << b
		c.live++
		slot := int32(i<<chunkBits | w*64 + b)
		s.index[key] = slot
		s.peak = max(s.peak, len(s.index))
		return slot
	}
	panic("apm: store chunk accounting is broken")
}

func (s *store) release(slot int32) {
	q := s.at(slot)
	if q == nil {
		return
	}
	delete(s.index, q.key)
	*q = qp{}
	i, off := int(slot>>chunkBits), int(slot&(chunkLen-1))
	c := s.chunks[i]
	c.used[off/64] &^= 1 << (off % 64)
	c.live--
	if c.live == 0 {
		if len(s.spare) < maxSpare {
			s.spare = append(s.spare, c) // every slot was zeroed on release
		}
		s.chunks[i] = nil
		for len(s.chunks) > 0 && s.chunks[len(s.chunks)-1] == nil {
			s.chunks = s.chunks[:len(s.chunks)-1]
		}
	}
	s.hint = min(s.hint, i)
	if s.peak > 4096 && len(s.index) < s.peak/4 {
		idx := make(map[uint64]int32, len(s.index))
		for k, v := range s.index {
			idx[k] = v
		}
		s.index, s.peak = idx, len(idx)
	}
}

func (s *store) live() int { return len(s.index) }

// interner maps strings (device names, comms) to small ids, bounded.
type interner struct {
	ids   map[string]uint32
	names []string
	max   int
}

func newInterner(max int) *interner {
	return &interner{ids: map[string]uint32{"": 0}, names: []string{""}, max: max}
}

func (in *interner) id(s string) uint32 {
	if id, ok := in.ids[s]; ok {
		return id
	}
	if len(in.names) >= in.max {
		return 0
	}
	id := uint32(len(in.names))
	in.ids[s] = id
	in.names = append(in.names, s)
	return id
}

func (in *interner) name(id uint32) string {
	if int(id) < len(in.names) {
		return in.names[id]
	}
	return ""
}

// each calls f for every interned name with its id (not the empty one).
func (in *interner) each(f func(id uint32, name string)) {
	for i, n := range in.names[1:] {
		f(uint32(i+1), n)
	}
}
