package audit

import (
	"io"
	"os"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/boottime"
	"github.com/apmwatch/apmwatch/internal/portaddr"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// Deps are the daemon's connections to the system; Main fills the ones
// left nil with the real thing.
type Deps struct {
	Open        func() (event.Source, error)    // the live probes (required)
	Check       func() error                    // privileges and ib_core, before anything starts
	Snapshot    func() (rdmanl.Snapshot, error) // rdma netlink (rdmanl.Read)
	Boot        func() uint64                   // CLOCK_BOOTTIME, ns
	BootID      func() string                   // the kernel's boot identity ("" unknown: nothing is restored)
	Now         func() time.Time                // wall clock
	ModulesRoot string                          // /sys/module
	Stdout      io.Writer                       // finding lines with Config.Stdout
	Stderr      io.Writer                       // the daemon's log (logfmt lines)
	Reopen      <-chan struct{}                 // SIGHUP: reopen the finding log
	OpenFile    fileOpener                      // the finding log (os.OpenFile)
	Create      writerFactory                   // the flight recorder (recording.Create)
	NewTimer    func(time.Duration) Timer       // the loop's deadline timer (time.NewTimer)
}

func (d *Deps) fill() {
	if d.Snapshot == nil {
		d.Snapshot = rdmanl.Read
	}
	if d.Boot == nil {
		d.Boot = boottime.Now
	}
	if d.BootID == nil {
		d.BootID = portaddr.BootID
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.ModulesRoot == "" {
		d.ModulesRoot = "/sys/module"
	}
	if d.Stderr == nil {
		d.Stderr = os.Stderr
	}
	if d.Stdout == nil {
		d.Stdout = os.Stdout
	}
	if d.OpenFile == nil {
		d.OpenFile = openAppend
	}
	if d.Create == nil {
		d.Create = createRecording
	}
	if d.NewTimer == nil {
		d.NewTimer = newRealTimer
	}
}
