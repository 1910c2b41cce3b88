package collector

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/apmwatch/apmwatch/event"
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
)

// sharedMaps are created once and used by every program.
var sharedMaps = []string{"events", "counters", "scratch", "inflight", "modify_at", "umad_tids",
	"uverbs_failed", "uverbs_bundle", "uverbs_scratch"}

// loader loads one small collection per hook (so that one hook failing
// never stops another) around a set of shared maps.
type loader struct {
	mu      sync.Mutex // colls, links and log: hooks attach concurrently
	loadMu  sync.Mutex // one collection load at a time (see load)
	spec    *ebpf.CollectionSpec
	cache   *btf.Cache
	shared  map[string]*ebpf.Map
	colls   []*ebpf.Collection
	links   []link.Link
	log     io.Writer
	extra   []*btf.Spec // external module BTF, CO-RE targets (extbtf.go)
	extMods []string    // the modules it describes
	// kernelTypes, when set, is the one CO-RE target: modules define
	// types vmlinux also has (shadowed) with another layout (shadow.go).
	kernelTypes *btf.Spec
	shadowed    []string
	// verifyOnly: load each hook's programs, then free them, attach
	// nothing (Verify).
	verifyOnly bool
}

func newLoader(cfg apmApmConfig, ring uint32, cache *btf.Cache, log io.Writer) (*loader, error) {
	spec, err := loadApm()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded probes: %w", err)
	}
	if err := setRing(spec, ring); err != nil {
		return nil, err
	}
	if err := spec.Variables["cfg"].Set(cfg); err != nil {
		return nil, fmt.Errorf("setting the probe config: %w", err)
	}
	l := &loader{spec: spec, cache: cache, shared: make(map[string]*ebpf.Map), log: log}
	for _, name := range sharedMaps {
		m, err := ebpf.NewMap(spec.Maps[name])
		if err != nil {
			l.close()
			return nil, fmt.Errorf("creating map %s: %w", name, err)
		}
		l.shared[name] = m
	}
	return l, nil
}

// load creates the named programs, aimed at attachTo where that matters.
func (l *loader) load(progs []string, attachTo string) (*ebpf.Collection, error) {
	// A spec of only the programs wanted, copied (AttachTo is set on
	// them). Maps and variables are copied too; the object's BTF (Types)
	// is shared: the collection loader copies what it changes and never
	// touches Types, whose copy was most of the cost of a whole
	// CollectionSpec.Copy per hook.
	cs := &ebpf.CollectionSpec{
		Maps:      make(map[string]*ebpf.MapSpec, len(l.spec.Maps)),
		Programs:  make(map[string]*ebpf.ProgramSpec, len(progs)),
		Variables: make(map[string]*ebpf.VariableSpec, len(l.spec.Variables)),
		ByteOrder: l.spec.ByteOrder,
		Types:     l.spec.Types,
	}
	used := referencedMaps(l.spec, progs)
	for name, m := range l.spec.Maps {
		if m.Type == ebpf.TaskStorage && !used[name] {
			continue // per-task state of one hook: made only where used
		}
		cs.Maps[name] = m.Copy()
	}
	for name, v := range l.spec.Variables {
		cs.Variables[name] = v.Copy()
	}
	for _, name := range progs {
		p, ok := l.spec.Programs[name]
		if !ok {
			return nil, fmt.Errorf("no program %s in the probes", name)
		}
		p = p.Copy()
		p.AttachTo = attachTo
		cs.Programs[name] = p
	}
	// One load at a time: the BTF of a module is split on top of
	// vmlinux's, and cilium/ebpf (v0.22) inflates base types from a
	// module's decoder without the base's lock, so two relocations at
	// once can corrupt the shared cache. The links, the slow part of
	// attaching (trampolines, kprobes), are still made concurrently.
	l.loadMu.Lock()
	coll, err := ebpf.NewCollectionWithOptions(cs, ebpf.CollectionOptions{
		MapReplacements: maps.Clone(l.shared),
		Cache:           l.cache,
		Programs:        ebpf.ProgramOptions{KernelTypes: l.kernelTypes, ExtraRelocationTargets: l.extra},
	})
	l.loadMu.Unlock()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.colls = append(l.colls, coll)
	l.mu.Unlock()
	return coll, nil
}

// referencedMaps names the maps the programs load. A collection creates
// every map in its spec, so a map only one hook uses (ib_cm_notify's
// per-task storage) is left out of the others: created there only, and a
// kernel that cannot make it fails that hook alone, which then falls back
// to its kprobes.
func referencedMaps(spec *ebpf.CollectionSpec, progs []string) map[string]bool {
	used := map[string]bool{}
	for _, name := range progs {
		p, ok := spec.Programs[name]
		if !ok {
			continue
		}
		for i := range p.Instructions {
			if ins := &p.Instructions[i]; ins.IsLoadFromMap() {
				used[ins.Reference()] = true
			}
		}
	}
	return used
}

// attach attaches one target, falling back from BTF programs to kprobes
// (or raw tracepoints), and records how in t.
func (l *loader) attach(t *target) {
	if t.method != event.HookFentry && t.method != event.HookKprobe && t.method != event.HookTracepoint {
		return
	}
	var errs []string
	if t.btf {
		err := l.attachBTF(t)
		if err == nil {
			return
		}
		l.logErr(t.def.Name, btfMethod(t)+" attach failed", err)
		errs = append(errs, fmt.Sprintf("%s failed: %s", btfMethod(t), firstLine(err)))
	}
	err := l.attachFallback(t)
	if err == nil {
		if len(errs) > 0 {
			t.reason = strings.Join(errs, "; ")
		}
		if t.def.Kind != hookTracepoint {
			t.method = event.HookKprobe
		}
		return
	}
	l.logErr(t.def.Name, fallbackMethod(t)+" attach failed", err)
	errs = append(errs, fmt.Sprintf("%s failed: %s", fallbackMethod(t), firstLine(err)))
	t.method, t.reason, t.failed = event.HookMissing, strings.Join(errs, "; "), true
}

func btfMethod(t *target) string {
	if t.def.Kind == hookTracepoint {
		return "tp_btf"
	}
	return "fentry"
}

func fallbackMethod(t *target) string {
	if t.def.Kind == hookTracepoint {
		return "raw_tp"
	}
	return "kprobe"
}

func (l *loader) attachBTF(t *target) error {
	if t.def.Kind == hookTracepoint {
		_, name := tpName(t.def.Name)
		return l.attachTracing([]string{t.def.TPBTF}, name)
	}
	progs := slices.DeleteFunc([]string{t.def.Fentry, t.def.Fexit}, func(s string) bool { return s == "" })
	return l.attachTracing(progs, t.def.Name)
}

func (l *loader) attachTracing(progs []string, attachTo string) error {
	coll, err := l.load(progs, attachTo)
	if err != nil {
		return fmt.Errorf("loading %s: %w", strings.Join(progs, ", "), err)
	}
	if l.verifyOnly {
		l.drop(coll)
		return nil
	}
	var ls []link.Link
	// Exit before entry: an entry without its exit would leave records
	// waiting in the join map.
	for _, name := range slices.Backward(progs) {
		lk, err := link.AttachTracing(link.TracingOptions{Program: coll.Programs[name]})
		if err != nil {
			closeLinks(ls)
			l.drop(coll)
			return fmt.Errorf("attaching %s: %w", name, err)
		}
		ls = append(ls, lk)
	}
	l.keep(ls)
	return nil
}

func (l *loader) attachFallback(t *target) error {
	if t.def.Kind == hookTracepoint {
		_, name := tpName(t.def.Name)
		coll, err := l.load([]string{t.def.RawTP}, name)
		if err != nil {
			return fmt.Errorf("loading %s: %w", t.def.RawTP, err)
		}
		if l.verifyOnly {
			l.drop(coll)
			return nil
		}
		lk, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: name, Program: coll.Programs[t.def.RawTP]})
		if err != nil {
			l.drop(coll)
			return fmt.Errorf("attaching raw tracepoint %s: %w", name, err)
		}
		l.keep([]link.Link{lk})
		return nil
	}
	entry, exit := t.def.Kprobe, t.def.Kretprobe
	progs := slices.DeleteFunc([]string{entry, exit}, func(s string) bool { return s == "" })
	if len(progs) == 0 {
		return errors.New("no kprobe program for this hook")
	}
	coll, err := l.load(progs, t.def.Name)
	if err != nil {
		return fmt.Errorf("loading %s: %w", strings.Join(progs, ", "), err)
	}
	if l.verifyOnly {
		l.drop(coll)
		return nil
	}
	var ls []link.Link
	// The exit probe goes first: an entry without its exit would leave
	// records waiting in the join map.
	if exit != "" {
		lk, err := link.Kretprobe(t.kprobeSymbol(), coll.Programs[exit], nil)
		if err != nil {
			l.drop(coll)
			return fmt.Errorf("kretprobe %s: %w", t.kprobeSymbol(), err)
		}
		ls = append(ls, lk)
	}
	if entry != "" {
		lk, err := link.Kprobe(t.kprobeSymbol(), coll.Programs[entry], nil)
		if err != nil {
			closeLinks(ls)
			l.drop(coll)
			return fmt.Errorf("kprobe %s: %w", t.kprobeSymbol(), err)
		}
		ls = append(ls, lk)
	}
	l.keep(ls)
	return nil
}

func (l *loader) keep(ls []link.Link) {
	l.mu.Lock()
	l.links = append(l.links, ls...)
	l.mu.Unlock()
}

// drop frees a collection whose programs could not be attached.
func (l *loader) drop(c *ebpf.Collection) {
	l.mu.Lock()
	l.colls = slices.DeleteFunc(l.colls, func(x *ebpf.Collection) bool { return x == c })
	l.mu.Unlock()
	c.Close()
}

// logErr prints an attach failure whole: a verifier log in full (%+v).
func (l *loader) logErr(hook, what string, err error) {
	if l.log == nil {
		return
	}
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		l.logf("%s: %s: %s\n%+v", hook, what, firstLine(err), ve)
		return
	}
	l.logf("%s: %s: %v", hook, what, err)
}

func (l *loader) logf(format string, args ...any) {
	if l.log != nil {
		l.mu.Lock()
		fmt.Fprintf(l.log, "apmwatch: "+format+"\n", args...)
		l.mu.Unlock()
	}
}

func closeLinks(ls []link.Link) {
	for _, lk := range ls {
		lk.Close()
	}
}

// close detaches every link, then frees programs and maps.
func (l *loader) close() {
	closeLinks(l.links)
	l.links = nil
	for _, c := range l.colls {
		c.Close()
	}
	l.colls = nil
	for _, m := range l.shared {
		m.Close()
	}
	l.shared = nil
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// setRing sizes the ring buffer the probes write their records to.
func setRing(spec *ebpf.CollectionSpec, bytes uint32) error {
	m, ok := spec.Maps["events"]
	if !ok {
		return fmt.Errorf("the embedded probes have no events map")
	}
	m.MaxEntries = bytes
	return nil
}
