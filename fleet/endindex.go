package fleet

import (
	"hash/maphash"

	"github.com/apmwatch/apmwatch/fleet/wire"
)

// endIndex finds an end's slot by its key. The keys live in the slab
// (each end holds its own), so the index holds only a slot and 32 bits
// of the key's hash a cell: 8 bytes, where a Go map would keep a copy of
// the 20-byte key beside each slot (about 58 bytes an end measured,
// BenchmarkEngineMemory1M). Open addressing with linear probing, at most
// three quarters full; a removal shifts the cells after it back (no
// tombstones). The hash is seeded per engine: records are hostile input
// and a chosen-collision attack needs the seed.
type endIndex struct {
	seed  maphash.Seed
	cells []uint64 // 0 empty, else hash<<32 | slot+1
	n     int
}

func newEndIndex() endIndex { return endIndex{seed: maphash.MakeSeed(), cells: make([]uint64, 64)} }

func (x *endIndex) hash(k wire.EndKey) uint32 { return uint32(maphash.Comparable(x.seed, k)) }

// find returns the cell of k, or of the empty cell where it would go.
func (x *endIndex) find(k wire.EndKey, s *endSlab) (cell int, found bool) {
	h := x.hash(k)
	mask := len(x.cells) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		c := x.cells[i]
		if c == 0 {
			return i, false
		}
		if uint32(c>>32) == h && s.at(uint32(c)-1).key == k {
			return i, true
		}
	}
}

// get returns k's slot.
func (x *endIndex) get(k wire.EndKey, s *endSlab) (uint32, bool) {
	i, ok := x.find(k, s)
	if !ok {
		return 0, false
	}
	return uint32(x.cells[i]) - 1, true
}

// put indexes slot under k, which it does not hold yet.
func (x *endIndex) put(k wire.EndKey, slot uint32, s *endSlab) {
	if (x.n+1)*4 > len(x.cells)*3 {
		x.grow()
	}
	i, _ := x.find(k, s)
	x.cells[i] = uint64(x.hash(k))<<32 | uint64(slot+1)
	x.n++
}

// del removes k: the cells of the probe run after it move back to where
// a lookup finds them.
func (x *endIndex) del(k wire.EndKey, s *endSlab) {
	i, ok := x.find(k, s)
	if !ok {
		return
	}
	mask := len(x.cells) - 1
	for j := i; ; {
		x.cells[i] = 0
		for {
			j = (j + 1) & mask
			c := x.cells[j]
			if c == 0 {
				x.n--
				return
			}
			// c may fill the hole at i unless its home lies in (i, j]
			home := int(uint32(c>>32)) & mask
			if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
				x.cells[i] = c
				i = j
				break
			}
		}
	}
}

// grow doubles the table; a cell's hash says where it goes.
func (x *endIndex) grow() {
	old := x.cells
	x.cells = make([]uint64, 2*len(old))
	mask := len(x.cells) - 1
	for _, c := range old {
		if c == 0 {
			continue
		}
		i := int(uint32(c>>32)) & mask
		for x.cells[i] != 0 {
			i = (i + 1) & mask
		}
		x.cells[i] = c
	}
}

// each calls fn with every slot indexed, in no order.
func (x *endIndex) each(fn func(slot uint32)) {
	for _, c := range x.cells {
		if c != 0 {
			fn(uint32(c) - 1)
		}
	}
}
