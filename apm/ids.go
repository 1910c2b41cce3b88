package apm

import "sync/atomic"

// IDs hands out finding IDs. One allocator serves every producer of
// findings in a process (the model, the actuator, the pairing of two
// recordings), so an ID names one finding and a resolution's Resolves is
// never ambiguous. The zero value is ready; it is safe for concurrent use.
type IDs struct{ n atomic.Uint64 }

// Next returns a new ID, from 1.
func (i *IDs) Next() uint64 { return i.n.Add(1) }

// AtLeast moves the allocator so that the next ID is above n: a daemon
// restarted on its finding log goes on after the IDs it wrote before.
func (i *IDs) AtLeast(n uint64) {
	for {
		cur := i.n.Load()
		if cur >= n || i.n.CompareAndSwap(cur, n) {
			return
		}
	}
}
