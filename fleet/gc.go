package fleet

import (
	"os"
	"runtime/debug"
)

// gcPercent is the collector's target while an instance runs, unless the
// GOGC environment variable sets one: the heap may grow to 1.5 times what
// is live, not twice (Go's default). Nearly all an instance holds is the
// engine's ends, which hold no pointer (slab.go): a collection does not
// scan them, so collecting more often costs little CPU, and at 1 M
// connections it keeps the instance's RSS about 100 MiB lower
// (docs/performance.md, "Fleet end to end", measured both ways).
const gcPercent = 50

// tuneGC sets gcPercent unless GOGC is set, and says which holds.
func tuneGC() (percent int, fromEnv bool) {
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		return p, true
	}
	debug.SetGCPercent(gcPercent)
	return gcPercent, false
}
