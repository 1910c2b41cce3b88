package collector

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/ebpf/btf"
)

// Start-up is mostly waiting on three independent reads and on the BPF
// verifier: /proc/kallsyms (some 170,000 lines), the BTF of vmlinux and of
// the RDMA modules, and the embedded probes' ELF. They run side by side,
// each BTF parsed once (btf.Cache), and the hooks are then attached by a
// few workers: each hook is its own collection, so one failing still never
// stops another. The loads themselves take turns (loader.load says why);
// the links (trampolines, kprobes) are made concurrently.
// docs/performance.md ("Attach time") has the measurements.

// prepare reads kallsyms, warms the BTF cache and loads the embedded probes
// with their shared maps, concurrently.
func prepare(cfg apmApmConfig, ring uint32, opts Options) (*liveKernel, *loader, error) {
	cache := btf.NewCache()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		warmBTF(cache, append(hookModules(defaultHooks()), eventHookModules(opts.hookSpecs())...))
	}()
	var l *loader
	var lerr error
	go func() {
		defer wg.Done()
		l, lerr = newLoader(cfg, ring, cache, opts.Log)
	}()
	k, kerr := newLiveKernel(cache, symbolNames(defaultHooks(), opts.hookSpecs()))
	wg.Wait()
	if err := errors.Join(kerr, lerr); err != nil {
		if l != nil {
			l.close()
		}
		return nil, nil, err
	}
	d := opts.extDir(l.spec.Types)
	ext, err := loadExtBTF(d, cache.Kernel)
	if err == nil {
		err = l.relocateAgainst(cache, ext, append(hookModules(defaultHooks()), eventHookModules(opts.hookSpecs())...))
	}
	if err != nil {
		l.close()
		return nil, nil, err
	}
	if opts.Log != nil {
		if len(ext.modules) > 0 {
			fmt.Fprintf(opts.Log, "btf for %s from %s\n", strings.Join(ext.modules, ", "), d.dir)
		}
		for _, why := range ext.ignored {
			fmt.Fprintf(opts.Log, "btf: not taken: %s\n", why)
		}
		if len(l.shadowed) > 0 {
			fmt.Fprintf(opts.Log, "btf: modules define %s with their own layout: the probes read the modules' definitions, not vmlinux's\n", strings.Join(l.shadowed, ", "))
		}
	}
	return k, l, nil
}

// warmBTF parses the BTF of vmlinux and of every loaded module among mods
// into cache, and builds their name indexes (the first lookup by name
// indexes the whole spec), so that planning and the loads find them ready.
// Errors are the loads' to report (a kernel without BTF falls back to
// kprobes).
func warmBTF(cache *btf.Cache, mods []string) {
	spec, err := cache.Kernel()
	if err != nil {
		return
	}
	var fn *btf.Func
	_ = spec.TypeByName("ib_modify_qp", &fn)
	for _, m := range mods {
		if _, err := os.Stat("/sys/kernel/btf/" + m); err != nil {
			continue
		}
		if spec, err := cache.Module(m); err == nil {
			_ = spec.TypeByName("ib_modify_qp", &fn)
		}
	}
}

func hookModules(defs []hookDef) []string {
	var out []string
	for _, d := range defs {
		if d.Module != "" && !slices.Contains(out, d.Module) {
			out = append(out, d.Module)
		}
	}
	return out
}

func eventHookModules(specs []string) []string {
	var out []string
	for _, s := range specs {
		if m, _, ok := strings.Cut(s, ":"); ok && m != "" {
			out = append(out, m)
		}
	}
	return out
}

// attachWorkers bounds the hooks loaded at once: the verifier runs in the
// loading thread, so more workers than CPUs gain nothing.
func attachWorkers() int { return min(max(runtime.NumCPU(), 2), 8) }

// attachAll attaches every target, a few at a time. Each target is attached
// as attach does it alone (its own collection, its own fallback); only the
// loader's lists are shared, under l.mu.
func (l *loader) attachAll(targets []target) {
	work := make(chan *target)
	var wg sync.WaitGroup
	for range min(attachWorkers(), len(targets)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range work {
				l.attach(t)
			}
		}()
	}
	for i := range targets {
		work <- &targets[i]
	}
	close(work)
	wg.Wait()
}
