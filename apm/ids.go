package apm

import "sync/atomic"

// IDs hands out finding IDs. One allocator serves every producer of
// findings in a process (the model, the actuator, the pairing of two
// recordings), so an ID names one finding and a resolution's Resolves is
// never ambiguous. The zero value is ready; it is safe for concurrent use.
type IDs struct{ n atomic.Uint64 }

// Next returns a new ID, from 1.
func (i *IDs) Next() uint64 { return i.n.Add(1) }
