// Package collector loads the apmwatch probes, attaches them with the best
// method each hook allows on the running kernel, and turns the ring buffer
// records into event.Events. A Collector is an event.Source.
package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/boottime"
	"github.com/apmwatch/apmwatch/internal/portaddr"
	"github.com/apmwatch/apmwatch/internal/version"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// The probes never wake the reader (a wakeup is an interrupt, dearer than
// the rest of a probe): it polls every pollInterval and reads until the
// ring is empty. This bounds the latency of an event to pollInterval.
const pollInterval = 20 * time.Millisecond

// Options configure a live collector.
type Options struct {
	AllMADs     bool     // every MAD class, not only CM (0x07)
	ForceKprobe bool     // kprobes and raw tracepoints only (tests the fallback)
	EventHooks  []string // extra (struct ib_event *, void *) QP event handlers
	// RawEventHooks are extra functions shaped like mlx5_ib_qp_event
	// (struct mlx5_core_qp *, int type): MODULE:FUNC. The lab's HCA has
	// one, so that the raw driver hook's path runs end to end there.
	RawEventHooks []string
	RingMiB       int // the probes' ring buffer in MiB, a power of two (0: DefaultRingMiB)
	// BTFDir holds external BTF for modules without their own
	// (MODULE.btf, extbtf.go); "": BTFDefaultDir() when it exists.
	BTFDir string
	Log    io.Writer // fallback and verifier details; nil: quiet
}

func (o Options) plan() planOptions {
	return planOptions{ForceKprobe: o.ForceKprobe, EventHooks: o.EventHooks, RawEventHooks: o.RawEventHooks}
}

// extDir is the external BTF directory (and whether the user named it),
// with what its files may describe: the modules the probes hook, those
// the options add, and the core drivers whose QP types the raw hooks read.
func (o Options) extDir(local *btf.Spec) extDir {
	d := extDir{dir: o.BTFDir, explicit: o.BTFDir != "", sysBTF: "/sys/kernel/btf", sysMod: "/sys/module", local: local}
	if d.dir == "" {
		d.dir = BTFDefaultDir()
	}
	d.modules = append(hookModules(defaultHooks()), eventHookModules(o.hookSpecs())...)
	d.modules = append(d.modules, typeModules...)
	return d
}

// typeModules define types the raw driver hooks read (struct mlx5_core_qp,
// struct mlx4_qp) without being hooked themselves.
var typeModules = []string{"mlx5_core", "mlx4_core"}

// hookSpecs is every MODULE:FUNC or FUNC the options add.
func (o Options) hookSpecs() []string {
	return append(slices.Clone(o.EventHooks), o.RawEventHooks...)
}

// Plan lists every hook and how it would be attached, without attaching.
func Plan(opts Options) ([]event.Hook, error) {
	cache := btf.NewCache()
	k, err := newLiveKernel(cache, symbolNames(defaultHooks(), opts.hookSpecs()))
	if err != nil {
		return nil, err
	}
	local, err := ProgramBTF()
	if err != nil {
		return nil, err
	}
	ext, err := loadExtBTF(opts.extDir(local), cache.Kernel)
	if err != nil {
		return nil, err
	}
	targets := plan(k, defaultHooks(), opts.plan())
	noteExt(targets, ext.modules)
	var out []event.Hook
	for _, t := range targets {
		out = append(out, t.hook())
	}
	return out, nil
}

// Collector is a live event.Source.
type Collector struct {
	meta      event.Meta
	loader    *loader
	reader    *ringbuf.Reader
	dec       decoder
	out       chan item
	done      chan struct{} // closed last: stop sending
	readDone  chan struct{}
	err       error // set before out is closed
	seq       atomic.Uint64
	decErrs   atomic.Uint64
	once      sync.Once
	closing   atomic.Bool   // set once the probes are detached
	want      atomic.Uint64 // Boot a watermark is asked past (WantMark), 0: none
	missed    missedReader  // the kernel's skipped probe runs (missed.go)
	flushing  atomic.Bool   // WantMark woke the reader, which has not seen it yet
	marking   atomic.Bool   // a reader takes marks (NextMark, WantMark)
	waitUntil atomic.Int64  // unix ns the reader's current wait ends
	lastMark  uint64        // the reader's last mark
	calls     announcer     // the calls in progress announced (announce.go)
	final     *event.Stats  // counters as they were at Close
	Attach    time.Duration // time to load and attach every probe
}

// attachPlanned plans every hook and attaches it (or, in a verifying
// loader, only loads it); the fallbacks of a primary QP-event hook that
// failed are attached after all.
func attachPlanned(k *liveKernel, l *loader, opts Options) []target {
	targets := plan(k, defaultHooks(), opts.plan())
	noteExt(targets, l.extMods)
	l.attachAll(targets)
	if again := unskip(targets); len(again) > 0 {
		sub := make([]target, len(again))
		for j, i := range again {
			sub[j] = targets[i]
		}
		l.attachAll(sub)
		for j, i := range again {
			targets[i] = sub[j]
		}
	}
	return targets
}

// Verify is Plan proven: every hook's programs are loaded into the kernel
// (CO-RE relocations, the verifier, the attach target's BTF) and freed,
// none attached, so what it reports is what Open would attach. It needs
// Open's privileges (Preflight).
func Verify(opts Options) ([]event.Hook, error) {
	if err := Preflight(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raising the memlock limit: %w", err)
	}
	ring, err := opts.ringBytes()
	if err != nil {
		return nil, err
	}
	k, l, err := prepare(apmApmConfig{}, ring, opts)
	if err != nil {
		return nil, err
	}
	defer l.close()
	l.verifyOnly = true
	var hooks []event.Hook
	for _, t := range attachPlanned(k, l, opts) {
		h := t.hook()
		h.Verified = true
		hooks = append(hooks, h)
	}
	return hooks, nil
}

// Open checks privileges, loads and attaches every probe, and starts reading.
// A hook missing on this kernel is reported in Meta().Hooks, never fatal.
func Open(opts Options) (*Collector, error) {
	if err := Preflight(); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raising the memlock limit: %w", err)
	}
	cfg := apmApmConfig{}
	if opts.AllMADs {
		cfg.AllMads = 1
	}
	ring, err := opts.ringBytes()
	if err != nil {
		return nil, err
	}
	k, l, err := prepare(cfg, ring, opts)
	if err != nil {
		return nil, err
	}
	targets := attachPlanned(k, l, opts)
	var hooks []event.Hook
	var names []string
	for i := range targets {
		hooks = append(hooks, targets[i].hook())
		names = append(names, targets[i].def.Name)
	}
	rd, err := ringbuf.NewReader(l.shared["events"])
	if err != nil {
		l.close()
		return nil, fmt.Errorf("opening the ring buffer: %w", err)
	}
	offset, err := boottime.Offset()
	if err != nil {
		rd.Close()
		l.close()
		return nil, err
	}
	host, _ := os.Hostname()
	c := &Collector{
		meta: event.Meta{
			Host: host, Kernel: kernelRelease(), BootOffset: offset,
			Hooks: hooks, Version: version.Get().Version,
			BootID: portaddr.BootID(), Ports: portaddr.Read(""),
		},
		loader:   l,
		reader:   rd,
		dec:      decoder{offset: offset, names: k.syms.addrs(names), devs: newDevNames(listDevices)},
		out:      make(chan item, 1024),
		done:     make(chan struct{}),
		readDone: make(chan struct{}),
		Attach:   time.Since(start),
	}
	go c.read()
	return c, nil
}

// Boot is CLOCK_BOOTTIME now in nanoseconds: the clock of the events'
// Boot stamps (0 if it cannot be read).
func Boot() uint64 { return boottime.Now() }

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// item is an event or a watermark.
type item struct {
	e    *event.Event
	mark uint64
}

func (c *Collector) read() {
	defer close(c.out)
	defer close(c.readDone)
	var rec ringbuf.Record
	for {
		// Only this goroutine reads, so SetDeadline never waits on a
		// blocked read. The probes never wake it: records are picked up
		// when the deadline passes (pollInterval, or sooner for a
		// requested mark), or when WantMark flushes the reader.
		c.reader.SetDeadline(c.readDeadline())
		err := c.reader.ReadInto(&rec)
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ringbuf.ErrFlushed) {
			// Every record is read (a flush asks for a watermark, or
			// ends the stream).
			if errors.Is(err, ringbuf.ErrFlushed) {
				c.flushing.Store(false)
			}
			if c.closing.Load() {
				// Close flushes once the probes are detached: the
				// records left are read first, then the stream ends.
				if c.reader.AvailableBytes() == 0 {
					return
				}
				continue
			}
			if !c.announce() || !c.sendMark() {
				return
			}
			continue
		}
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				c.err = fmt.Errorf("reading the ring buffer: %w", err)
			}
			return
		}
		e, err := c.dec.decode(rec.RawSample)
		if err != nil {
			c.decErrs.Add(1)
			continue
		}
		if e == nil { // a device's name, kept by the decoder
			continue
		}
		if !c.send(e) {
			return
		}
	}
}

// send hands an event on, numbered. false: the collector is closing.
func (c *Collector) send(e *event.Event) bool {
	e.Seq = c.seq.Add(1)
	select {
	case c.out <- item{e: e}:
		return true
	case <-c.done:
		return false
	}
}

// announce hands on a modify-entry event for each call of the APM
// attributes still in progress (announce.go). false: the collector is
// closing.
func (c *Collector) announce() bool {
	for _, r := range c.calls.calls(c.loader.shared["modify_at"], c.loader.shared["inflight"], boottime.Now()) {
		e, err := c.dec.event(&r)
		if err != nil {
			c.decErrs.Add(1)
			continue
		}
		if !c.send(e) {
			return false
		}
	}
	return true
}

// Meta describes the host and every hook with how it was attached.
func (c *Collector) Meta() event.Meta { return c.meta }

// Next returns the next event; io.EOF after Close.
func (c *Collector) Next(ctx context.Context) (*event.Event, error) {
	for {
		it, err := c.recv(ctx)
		if err != nil || it.mark == 0 {
			return it.e, err
		}
	}
}

// NextMark returns the next event or watermark (event.Marker); io.EOF
// after Close.
func (c *Collector) NextMark(ctx context.Context) (*event.Event, uint64, error) {
	c.marking.Store(true)
	it, err := c.recv(ctx)
	return it.e, it.mark, err
}

func (c *Collector) recv(ctx context.Context) (item, error) {
	select {
	case it, ok := <-c.out:
		if !ok {
			if c.err != nil {
				return item{}, c.err
			}
			return item{}, io.EOF
		}
		return it, nil
	case <-ctx.Done():
		return item{}, ctx.Err()
	}
}

// Stats reads the kernel counters.
func (c *Collector) Stats() event.Stats {
	if c.final != nil {
		s := *c.final
		s.Events, s.DecodeErrs = c.seq.Load(), c.decErrs.Load()
		return s
	}
	s := event.Stats{Events: c.seq.Load(), DecodeErrs: c.decErrs.Load()}
	s.Missed, s.MissedAt = c.missed.read(c.loader, false)
	s.At = boottime.Now()
	m := c.loader.shared["counters"]
	var lost, unjoined []uint64
	if m.Lookup(uint32(apmApmCounterAPM_CNT_LOST), &lost) == nil {
		s.LostPerCPU = lost
		for _, v := range lost {
			s.Lost += v
		}
	}
	if m.Lookup(uint32(apmApmCounterAPM_CNT_UNJOINED), &unjoined) == nil {
		for _, v := range unjoined {
			s.Unjoined += v
		}
	}
	return s
}

// Close detaches every probe, then lets Next return the records already in
// the ring buffer (up to the channel's capacity) before io.EOF. Safe to call
// more than once.
func (c *Collector) Close() error {
	c.once.Do(func() {
		c.missed.read(c.loader, true)
		c.missed.linksClosing(c.loader)
		closeLinks(c.loader.links) // no new records from here on
		c.loader.links = nil
		c.closing.Store(true)
		// Not SetDeadline: it waits for the reader's lock, which a
		// blocked read holds. Flush wakes the read instead.
		_ = c.reader.Flush() // on failure the timeout below and Close still end the read
		select {
		case <-c.readDone:
		case <-time.After(time.Second):
		}
		s := c.Stats()
		c.final = &s
		close(c.done)
		c.reader.Close()
		<-c.readDone
		c.loader.close()
	})
	return nil
}

var _ event.Marker = (*Collector)(nil)
