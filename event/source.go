package event

import (
	"context"
	"time"
)

// HookMethod says how a hook was attached.
type HookMethod string

const (
	HookFentry     HookMethod = "fentry"
	HookKprobe     HookMethod = "kprobe"
	HookTracepoint HookMethod = "tracepoint"
	HookMissing    HookMethod = "missing"
	HookSkipped    HookMethod = "skipped" // present but not needed (a better hook covers it)
)

// Hook describes one probe target and how (or why not) it was attached.
type Hook struct {
	Name   string     `json:"name"`   // function or tracepoint
	Module string     `json:"module"` // ib_core, ib_cm, ...
	Signal string     `json:"signal"` // what it observes
	Method HookMethod `json:"method"`
	Reason string     `json:"reason,omitempty"` // why missing or why the fallback
	// Failed: the kernel has the hook but no program could attach to it
	// (the reason says why); a hook the kernel lacks is only missing.
	Failed bool `json:"failed,omitempty"`
	// Carries names the APM signal the hook carries, for the hooks the
	// model cannot do without (blind.go); "" for the others.
	Carries string `json:"carries,omitempty"`
	// Verified: the hook's programs were loaded into this kernel (the
	// verifier passed them), not only planned (apmwatch probes as root).
	Verified bool `json:"verified,omitempty"`
}

// Meta describes where a stream comes from.
type Meta struct {
	Host       string        `json:"host"`
	Kernel     string        `json:"kernel"`
	BootOffset time.Duration `json:"boot_offset_ns"` // wall clock minus CLOCK_BOOTTIME
	Hooks      []Hook        `json:"hooks"`
	Version    string        `json:"version"`
	// BootID is the kernel's boot identity (/proc/sys/kernel/random/boot_id):
	// two streams of one host and boot share it ("" when unknown).
	BootID string `json:"boot_id,omitempty"`
	// Ports are the addresses of the host's RDMA ports when the stream
	// started (sysfs), so that a path of another host can be shown to lead
	// here ("nil" when unknown, as in older recordings).
	Ports []PortAddr `json:"ports,omitempty"`
}

// PortAddr is one port's addresses: its LID (0 when it has none, as on
// RoCE) and its GIDs in use.
type PortAddr struct {
	Device string `json:"device"`
	Port   uint32 `json:"port"`
	LID    uint16 `json:"lid,omitempty"`
	// LMC is the port's LID mask count (sysfs lid_mask_count, 0..7): the
	// port answers to the 2^LMC LIDs from LID. 0 in recordings that
	// predate it.
	LMC  uint8      `json:"lmc,omitempty"`
	GIDs [][16]byte `json:"gids,omitempty"`
}

// Bounds of Meta.Ports, so that a header stays small.
const (
	MaxPortAddrs = 256 // ports
	MaxPortGIDs  = 8   // GIDs of one port
)

// Stats are the counters of a source.
type Stats struct {
	Events     uint64   `json:"events"`
	Lost       uint64   `json:"lost"`         // ring buffer reserve failures (all CPUs)
	LostPerCPU []uint64 `json:"lost_per_cpu"` // index = CPU
	DecodeErrs uint64   `json:"decode_errors"`
	Unjoined   uint64   `json:"unjoined"` // exits whose entry was never seen
	// Missed: probe runs the kernel skipped, so their events were never
	// recorded: a program that was already running on the CPU (fentry's
	// per-program recursion guard, 5.12+; a kprobe's BPF program while
	// another ran, 6.7+), a kprobe hit inside another kprobe, a kretprobe
	// with no free instance (6.7+). Lost events like Lost.
	Missed uint64 `json:"missed,omitempty"`
	// MissedAt is when Missed was read (CLOCK_BOOTTIME ns; 0: with At):
	// the kernel's counters are read less often than the ring's.
	MissedAt uint64 `json:"missed_at_boot_ns,omitempty"`
	// At is when the counters were read (CLOCK_BOOTTIME ns; 0: unknown),
	// so that a loss can be placed in time.
	At uint64 `json:"at_boot_ns,omitempty"`
}

// Dropped is every event the probes lost: the ring buffer was full (Lost)
// or the kernel skipped the probe (Missed).
func (s Stats) Dropped() uint64 { return s.Lost + s.Missed }

// Source is the one stream API: the live collector and a recording reader both
// implement it.
type Source interface {
	Meta() Meta
	// Next blocks until the next event, ctx is done, or the stream ends
	// (io.EOF).
	Next(ctx context.Context) (*Event, error)
	Stats() Stats
	Close() error
}

// Marker is a Source whose stream also carries watermarks: points after
// which nothing stamped earlier can still come, so a consumer may judge up
// to them at once instead of waiting out a reorder window.
type Marker interface {
	Source
	// NextMark is Next that may also return a watermark instead of an
	// event (a nil event and mark > 0): every event with Boot < mark has
	// been returned already.
	NextMark(ctx context.Context) (ev *Event, mark uint64, err error)
	// WantMark asks for a watermark past at (Boot nanoseconds) as soon as
	// the clock gets there; a later call replaces the request, 0 cancels
	// it. It does not block and may be called from any goroutine.
	WantMark(at uint64)
}

// NextOrMark reads src through NextMark when it is a Marker, else through
// Next (never a mark).
func NextOrMark(ctx context.Context, src Source) (*Event, uint64, error) {
	if m, ok := src.(Marker); ok {
		return m.NextMark(ctx)
	}
	e, err := src.Next(ctx)
	return e, 0, err
}
