// Package boottime reads CLOCK_BOOTTIME, the clock of every event's Boot
// stamp (the probes' bpf_ktime_get_boot_ns). Every reader of it in apmwatch
// goes through here.
package boottime

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Read is CLOCK_BOOTTIME now, in nanoseconds.
func Read() (uint64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, fmt.Errorf("reading CLOCK_BOOTTIME: %w", err)
	}
	return uint64(ts.Nano()), nil
}

// Now is Read for callers that cannot act on an error: 0 when the clock
// cannot be read (it always can on Linux).
func Now() uint64 {
	b, _ := Read()
	return b
}

// Offset is the wall clock minus CLOCK_BOOTTIME, now: Boot + Offset is the
// wall time of a Boot stamp.
func Offset() (time.Duration, error) {
	b, err := Read()
	if err != nil {
		return 0, err
	}
	return time.Duration(time.Now().UnixNano() - int64(b)), nil
}
