package testkit

import (
	"syscall"
	"testing"
	"time"
)

// CPUTime is the CPU time (user and system, every thread) the process
// used so far.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ReportCPU reports the CPU time per operation since start (a CPUTime
// taken where the timed part began) as cpu-ns/op: on a machine shared with
// other work the wall-clock ns/op also counts the time the benchmark
// waited for its core, the CPU time does not.
func ReportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(CPUTime()-start)/float64(b.N), "cpu-ns/op")
}
