package collector

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/cilium/ebpf/btf"
)

// kernelView is what planning needs to know about the running kernel.
type kernelView interface {
	// FuncModules lists where a text symbol lives ("vmlinux" for built-in).
	FuncModules(name string) []string
	// HasBTFFunc reports whether module (or "vmlinux") has BTF for the function.
	HasBTFFunc(module, name string) bool
	// HasTracepoint reports whether a tracepoint exists, and whether it has BTF (tp_btf).
	HasTracepoint(module, name string) (present, btf bool)
	// ModuleLoaded reports whether a kernel module is loaded (or built in).
	ModuleLoaded(module string) bool
}

type symbol struct {
	addr   uint64
	module string
}

// kallsyms is the parsed /proc/kallsyms: text symbols and tracepoint data.
type kallsyms struct {
	text map[string][]symbol
	tps  map[string]string // tracepoint name -> module

	want  map[string]bool // names kept (nil: all)
	maybe *[256]uint64    // by first byte, a bit per length of a wanted name
}

// readKallsyms parses /proc/kallsyms, keeping only the text symbols and
// tracepoints named in want (nil: all). The file has some 170,000
// lines; splitting each into strings took seconds under emulation, so
// lines are cut in place and only a wanted name becomes a string.
func readKallsyms(r io.Reader, want map[string]bool) (*kallsyms, error) {
	k := &kallsyms{text: make(map[string][]symbol), tps: make(map[string]string)}
	if want != nil {
		k.want, k.maybe = want, new([256]uint64)
		for n := range want {
			if len(n) > 0 && len(n) < 64 {
				k.maybe[n[0]] |= 1 << len(n)
			} else if len(n) > 0 {
				k.maybe[n[0]] |= 1 << 63 // long names: always looked up
			}
		}
	}
	br := bufio.NewReaderSize(r, 256*1024)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) { // not kallsyms: skip the rest
				_, err = br.ReadSlice('\n')
			}
			continue
		}
		if len(line) > 0 {
			if perr := k.line(line); perr != nil {
				return nil, perr
			}
		}
		if errors.Is(err, io.EOF) {
			return k, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading kallsyms: %w", err)
		}
	}
}

// line takes one "ADDR TYPE NAME[\tMODULE]" line (kallsyms_show: one
// space after the address and the type, a tab before "[module]"). It is
// the hot loop of start-up under emulation: plain byte tests first.
func (k *kallsyms) line(line []byte) error {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	sp := 16 // a 64-bit address
	if len(line) <= sp || line[sp] != ' ' {
		if sp = bytes.IndexByte(line, ' '); sp < 0 {
			return nil
		}
	}
	if len(line) < sp+4 || line[sp+2] != ' ' {
		return k.slowLine(line)
	}
	typ, rest := line[sp+1], line[sp+3:]
	if typ != 't' && typ != 'T' && (len(rest) < 14 || rest[0] != '_' || rest[1] != '_' || rest[2] != 't') {
		return nil // neither a function nor a tracepoint
	}
	name, mod := rest, []byte(nil)
	if tab := bytes.IndexByte(rest, '\t'); tab >= 0 {
		name, mod = rest[:tab], rest[tab+1:]
	}
	return k.add(line[:sp], typ, name, mod)
}

// slowLine splits a line that is not in the kernel's own layout on any
// run of blanks.
func (k *kallsyms) slowLine(line []byte) error {
	f := bytes.Fields(bytes.TrimRight(line, "\r"))
	if len(f) < 3 || len(f[1]) != 1 {
		return nil
	}
	var mod []byte
	if len(f) > 3 {
		mod = f[3]
	}
	return k.add(f[0], f[1][0], f[2], mod)
}

func (k *kallsyms) add(addrText []byte, typ byte, name, mod []byte) error {
	switch typ {
	case 't', 'T':
		if !k.wanted(name) {
			return nil
		}
		addr, err := strconv.ParseUint(string(addrText), 16, 64)
		if err != nil {
			return fmt.Errorf("kallsyms: bad address %q", addrText)
		}
		k.text[string(name)] = append(k.text[string(name)], symbol{addr, module(mod)})
	default:
		tp, ok := bytes.CutPrefix(name, []byte("__tracepoint_"))
		if ok && k.wanted(tp) {
			k.tps[string(tp)] = module(mod)
		}
	}
	return nil
}

// wanted reports whether name is asked for. Most names are ruled out by
// their first byte and length before any hashing: under emulation the
// hash of 170,000 names was most of the parse.
func (k *kallsyms) wanted(name []byte) bool {
	if k.want == nil {
		return true
	}
	if len(name) == 0 {
		return false
	}
	bits := k.maybe[name[0]]
	if len(name) < 64 && bits&(1<<len(name)) == 0 && bits&(1<<63) == 0 {
		return false
	}
	return k.want[string(name)] // a map index converts without allocating
}

func module(f []byte) string {
	f = bytes.TrimSpace(f)
	if len(f) == 0 {
		return "vmlinux"
	}
	return string(bytes.Trim(f, "[]"))
}

// liveKernel is the kernelView of the running kernel.
type liveKernel struct {
	syms  *kallsyms
	cache *btf.Cache
}

// newLiveKernel reads the symbols named in want (nil: all).
func newLiveKernel(cache *btf.Cache, want map[string]bool) (*liveKernel, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return nil, fmt.Errorf("opening kallsyms: %w", err)
	}
	defer f.Close()
	syms, err := readKallsyms(f, want)
	if err != nil {
		return nil, err
	}
	return &liveKernel{syms: syms, cache: cache}, nil
}

func (k *liveKernel) FuncModules(name string) []string {
	var out []string
	for _, s := range k.syms.text[name] {
		out = append(out, s.module)
	}
	return out
}

func (k *liveKernel) spec(module string) (*btf.Spec, error) {
	if module == "vmlinux" {
		return k.cache.Kernel()
	}
	return k.cache.Module(module)
}

func (k *liveKernel) HasBTFFunc(module, name string) bool {
	spec, err := k.spec(module)
	if err != nil {
		return false
	}
	var fn *btf.Func
	return spec.TypeByName(name, &fn) == nil
}

func (k *liveKernel) HasTracepoint(module, name string) (bool, bool) {
	_, present := k.syms.tps[name]
	spec, err := k.spec(module)
	if err != nil {
		return present, false
	}
	var td *btf.Typedef
	hasBTF := spec.TypeByName("btf_trace_"+name, &td) == nil
	return present || hasBTF, hasBTF
}

func (k *liveKernel) ModuleLoaded(module string) bool {
	if module == "vmlinux" {
		return true
	}
	_, err := os.Stat("/sys/module/" + module)
	return !errors.Is(err, os.ErrNotExist)
}

// addrs maps the addresses of the named functions to their names, for
// turning bpf_get_func_ip() back into a hook name.
func (k *kallsyms) addrs(names []string) map[uint64]string {
	out := make(map[uint64]string)
	for _, n := range names {
		for _, s := range k.text[n] {
			if s.addr != 0 {
				out[s.addr] = n
			}
		}
	}
	return out
}
