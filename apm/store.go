package apm

// chunkBits sizes the slab chunks: a plain slice would waste up to a quarter
// of its capacity on growth, chunks waste at most one chunk.
const chunkBits = 10

// store keeps the QPs in chunked slabs indexed by int32, with a free list,
// and an index from (device, qpn) to slot. Slots of destroyed QPs are
// reused. A stale timer for a freed or reused slot is harmless: a freed
// slot has timerAt 0, and a wake-up for the wrong QP only re-judges it.
type store struct {
	index  map[uint64]int32
	chunks [][]qp
	free   []int32
	n      int32 // slots handed out
}

func newStore() *store { return &store{index: make(map[uint64]int32)} }

func (s *store) at(slot int32) *qp {
	return &s.chunks[slot>>chunkBits][slot&(1<<chunkBits-1)]
}

func (s *store) lookup(key uint64) (int32, bool) {
	slot, ok := s.index[key]
	return slot, ok
}

func (s *store) alloc(key uint64) int32 {
	var slot int32
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		slot = s.n
		s.n++
		if int(slot>>chunkBits) == len(s.chunks) {
			s.chunks = append(s.chunks, make([]qp, 1<<chunkBits))
		}
	}
	s.index[key] = slot
	return slot
}

func (s *store) release(slot int32) {
	q := s.at(slot)
	delete(s.index, q.key)
	*q = qp{}
	s.free = append(s.free, slot)
	// Go maps never shrink: rebuild the index once it is mostly empty so that
	// destroyed QPs leave no growth behind.
	if s.live() == 0 && len(s.free) > 4096 {
		s.index = make(map[uint64]int32)
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
