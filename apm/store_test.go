package apm_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
)

// The memory a million QPs took is given back once they are destroyed: the
// slab chunks of freed QPs and the index are released, whatever order the
// QPs went in, while a few QPs stay live.
func TestMemoryGivenBack(t *testing.T) {
	if testing.Short() {
		t.Skip("memory test: a million QPs")
	}
	const n, keep = 1 << 20, 100
	st := newStream(time.Microsecond)
	base := heapAlloc()
	m, err := apm.New(apm.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	connectQPs(m, st, 1, n)
	peak := heapAlloc()
	// Destroy every QP but a few spread over the whole range, odd numbers
	// first, so no chunk empties early.
	for _, odd := range []int{1, 0} {
		for q := 1; q <= n; q++ {
			if q%2 == odd && q%(n/keep) != 0 {
				m.Handle(st.step(uint32(q), 7))
			}
		}
	}
	m.Advance(st.boot + uint64(time.Hour))
	end := heapAlloc()
	runtime.KeepAlive(st)
	if got := m.Stats().QPs; got != keep {
		t.Fatalf("%d QPs live, want %d", got, keep)
	}
	grown, left := int64(peak)-int64(base), int64(end)-int64(base)
	t.Logf("heap: base %d, peak +%d, after destroy +%d", base, grown, left)
	if left > grown/10 {
		t.Errorf("after destroying %d of %d QPs the model still holds %d of the %d bytes they took", n-keep, n, left, grown)
	}
	runtime.KeepAlive(m)
}
