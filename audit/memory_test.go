package audit

import (
	"runtime"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm/apmtest"
)

// QPs made, migrated and destroyed in a loop: the daemon's heap after a
// GC stays flat (every table follows the live QPs).
func TestMemoryFlatOverQPChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("churn test")
	}
	h := newHarness(t, func(c *Config) { c.RecorderDir = "" })
	d := h.daemon()
	b := apmtest.New()
	b.Device = "rxe0"
	round := func(n int) {
		for i := 0; i < n; i++ {
			start := len(b.Steps)
			qpn := uint32(100 + i%5000)
			alt := apmtest.PathB
			b.Connect(qpn, apmtest.PathA, &alt)
			if i%10 == 0 {
				b.PathMig(qpn)
				b.After(3 * time.Second) // missed-rearm, then destroyed
			}
			b.Destroy(qpn)
			h.boot.Store(b.Now())
			h.feed(b.Steps[start:])
			b.Steps = b.Steps[:0]
		}
		h.boot.Store(b.Now() + uint64(time.Second)) // past the reorder window
	}
	heap := func() uint64 {
		// let the loop drain and tick
		for len(h.src.ch) > 0 || len(d.events) > 0 {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(3 * tickEvery)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	round(20000)
	h1 := heap()
	round(60000)
	h2 := heap()
	t.Logf("heap after 20k QPs %d KiB, after 80k %d KiB; findings %d", h1>>10, h2>>10, len(readLines(t, h.cfg.Findings)))
	if h2 > h1+2<<20 {
		t.Errorf("heap grew from %d to %d KiB over 60k more QPs", h1>>10, h2>>10)
	}
	h.stop() // the loop's tables are read once it is done
	if n := len(d.open); n != 0 {
		t.Errorf("%d open findings left for destroyed QPs", n)
	}
}
