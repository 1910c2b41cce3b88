package fleet

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/apmwatch/apmwatch/fleet/wire"
)

// TestEndIndexAgreesWithAMap puts, finds and removes keys at random
// (many keys, so probe runs cross the table's end and removals shift
// them), and checks every key against a Go map after each batch.
func TestEndIndexAgreesWithAMap(t *testing.T) {
	var slab endSlab
	x := newEndIndex()
	want := map[wire.EndKey]uint32{}
	r := rand.New(rand.NewPCG(1, 2))
	key := func() wire.EndKey {
		k := testKey(uint32(1 + r.IntN(3000)))
		k.Addr[0] = byte(r.IntN(3))
		return k
	}
	for step := range 200 {
		for range 500 {
			k := key()
			if slot, ok := want[k]; ok {
				if r.IntN(2) == 0 {
					x.del(k, &slab)
					slab.release(slot)
					delete(want, k)
				}
				continue
			}
			slot := slab.alloc()
			slab.at(slot).key = k
			x.put(k, slot, &slab)
			want[k] = slot
		}
		if x.n != len(want) {
			t.Fatalf("step %d: index holds %d keys, the map %d", step, x.n, len(want))
		}
		for k, slot := range want {
			if got, ok := x.get(k, &slab); !ok || got != slot {
				t.Fatalf("step %d: key %v: slot %d %v, want %d", step, k, got, ok, slot)
			}
		}
		seen := 0
		x.each(func(slot uint32) {
			if want[slab.at(slot).key] != slot {
				t.Fatalf("step %d: each gave slot %d of key %v", step, slot, slab.at(slot).key)
			}
			seen++
		})
		if seen != len(want) {
			t.Fatalf("step %d: each gave %d slots, want %d", step, seen, len(want))
		}
		if _, ok := x.get(testKey(5000), &slab); ok {
			t.Fatalf("step %d: a key never put is found", step)
		}
	}
}

// TestEndIndexRemovesFromFullRuns fills a small table to just under its
// growth point, so that runs are long and wrap past its last cell, then
// removes a third of the keys and checks all after each removal.
func TestEndIndexRemovesFromFullRuns(t *testing.T) {
	for seed := range 20 {
		var slab endSlab
		x := newEndIndex()
		var keys []wire.EndKey
		for i := range 48 { // 64 cells: grows past 48
			k := testKey(uint32(i + 1 + seed*100))
			s := slab.alloc()
			slab.at(s).key = k
			x.put(k, s, &slab)
			keys = append(keys, k)
		}
		if len(x.cells) != 64 {
			t.Fatalf("table of %d cells, want 64", len(x.cells))
		}
		for i, k := range keys {
			if i%3 != 0 {
				continue
			}
			x.del(k, &slab)
			for j, k2 := range keys {
				_, ok := x.get(k2, &slab)
				if gone := j%3 == 0 && j <= i; ok == gone {
					t.Fatalf("seed %d, after removing key %d: key %d found %v", seed, i, j, ok)
				}
			}
		}
	}
}

// testKey is a distinct key for each n (the index hashes the whole key).
func testKey(n uint32) wire.EndKey {
	var k wire.EndKey
	binary.BigEndian.PutUint32(k.Addr[12:], n)
	return k
}
