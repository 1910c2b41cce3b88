package fleet

import (
	"runtime/debug"
	"testing"
)

// TestTuneGCKeepsGOGC: an instance lowers the collector's target to
// gcPercent, unless GOGC chose one.
func TestTuneGCKeepsGOGC(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	t.Setenv("GOGC", "")
	if p, env := tuneGC(); p != gcPercent || env || debug.SetGCPercent(100) != gcPercent {
		t.Fatalf("without GOGC: %d (from GOGC %v), want %d", p, env, gcPercent)
	}
	t.Setenv("GOGC", "100") // the runtime read it at start; here it stands for one
	if p, env := tuneGC(); p != 100 || !env || debug.SetGCPercent(100) != 100 {
		t.Fatalf("with GOGC: %d (from GOGC %v), want 100 kept", p, env)
	}
}
