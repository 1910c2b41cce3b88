package boottime

import (
	"testing"
	"time"
)

// CLOCK_BOOTTIME runs: two reads 10 ms apart differ by at least that, and
// the offset puts now within a second of the wall clock.
func TestBoottime(t *testing.T) {
	a, err := Read()
	if err != nil || a == 0 {
		t.Fatalf("Read: %d, %v", a, err)
	}
	time.Sleep(10 * time.Millisecond)
	if b := Now(); b < a+uint64(10*time.Millisecond) {
		t.Fatalf("Now %d, want at least %d", b, a+uint64(10*time.Millisecond))
	}
	off, err := Offset()
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Unix(0, int64(Now())+int64(off))
	if d := time.Since(wall); d < -time.Second || d > time.Second {
		t.Fatalf("Now+Offset is %v from the wall clock", d)
	}
}
