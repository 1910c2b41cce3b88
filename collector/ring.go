package collector

import "fmt"

// DefaultRingMiB is the default size of the ring buffer the probes write
// to. A record takes 136 bytes there (128 and an 8-byte header), 192 with
// paths (a modify that loads one), 256 for a device's name: 16 MiB hold
// 65,536 records even at the largest size. A port failure that migrates 4,000 QPs at once
// brings about six events per QP (24,001 in the lab), most within
// milliseconds: more than the 16,384 records of 4 MiB. docs/performance.md
// ("Port-failure storm") has the measurements and what a larger host needs.
const DefaultRingMiB = 16

// MaxRingMiB bounds the ring buffer (locked kernel memory).
const MaxRingMiB = 1024

// CheckRingMiB validates a ring buffer size in MiB: the kernel wants a power
// of two (of pages).
func CheckRingMiB(n int) error {
	if n < 1 || n > MaxRingMiB || n&(n-1) != 0 {
		return fmt.Errorf("ring buffer size %d MiB: want a power of two from 1 to %d", n, MaxRingMiB)
	}
	return nil
}

// ringBytes is the events map's size for opts (0: the default).
func (o Options) ringBytes() (uint32, error) {
	n := o.RingMiB
	if n == 0 {
		n = DefaultRingMiB
	}
	if err := CheckRingMiB(n); err != nil {
		return 0, err
	}
	return uint32(n) << 20, nil
}
