package collector

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

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
}

func readKallsyms(r io.Reader) (*kallsyms, error) {
	k := &kallsyms{text: make(map[string][]symbol), tps: make(map[string]string)}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		mod := "vmlinux"
		if len(f) >= 4 {
			mod = strings.Trim(f[3], "[]")
		}
		name := f[2]
		switch f[1] {
		case "t", "T":
			addr, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil {
				return nil, fmt.Errorf("kallsyms: bad address %q", f[0])
			}
			k.text[name] = append(k.text[name], symbol{addr, mod})
		default:
			if tp, ok := strings.CutPrefix(name, "__tracepoint_"); ok {
				k.tps[tp] = mod
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading kallsyms: %w", err)
	}
	return k, nil
}

// liveKernel is the kernelView of the running kernel.
type liveKernel struct {
	syms  *kallsyms
	cache *btf.Cache
}

func newLiveKernel(cache *btf.Cache) (*liveKernel, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return nil, fmt.Errorf("opening kallsyms: %w", err)
	}
	defer f.Close()
	syms, err := readKallsyms(f)
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
