package collector

import "testing"

func TestCheckRingMiB(t *testing.T) {
	for n, ok := range map[int]bool{1: true, 16: true, 1024: true, 0: false, 3: false, 2048: false, -4: false} {
		if err := CheckRingMiB(n); (err == nil) != ok {
			t.Errorf("CheckRingMiB(%d) = %v, want ok %v", n, err, ok)
		}
	}
	if b, err := (Options{}).ringBytes(); err != nil || b != DefaultRingMiB<<20 {
		t.Errorf("default ring: %d, %v", b, err)
	}
	if b, err := (Options{RingMiB: 64}).ringBytes(); err != nil || b != 64<<20 {
		t.Errorf("64 MiB ring: %d, %v", b, err)
	}
}

// The size reaches the events map the probes are loaded with.
func TestLoaderRingSize(t *testing.T) {
	spec, err := loadApm()
	if err != nil {
		t.Fatal(err)
	}
	if err := setRing(spec, 32<<20); err != nil || spec.Maps["events"].MaxEntries != 32<<20 {
		t.Errorf("events map %d bytes (%v), want 32 MiB", spec.Maps["events"].MaxEntries, err)
	}
}
