package vm

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strings"
)

// RDMAModules are the soft-RoCE modules the guest loads, in load order.
// Their real dependencies come from the kernel's modules.dep (LoadOrder).
var RDMAModules = []string{
	"configfs", "crc32_generic", "udp_tunnel", "ip6_udp_tunnel", "veth",
	"ib_core", "ib_uverbs", "ib_umad", "ib_cm", "iw_cm", "rdma_cm", "rdma_ucm", "rdma_rxe",
	// No device binds to them; their BTF has struct mlx5_core_qp and
	// mlx5_ib's struct mlx5_ib_qp_base and mlx5_ib_qp, which the raw
	// driver hook's program reads through CO-RE (the QPN, and the QP it
	// belongs to). ibsim's raw event function has mlx5_ib_qp_event's
	// shape, and keeps its argument as mlx5_ib does; the lab's modules
	// carry no BTF of their own, so its hook relocates against these.
	"mlx5_core", "mlx5_ib",
}

// OptionalModules may be missing from a kernel: newer kernels have no
// crc32_generic (the CRC32 library needs no crypto module there).
var OptionalModules = map[string]bool{"crc32_generic": true}

// ModuleDeps maps a module path relative to /lib/modules/<ver> (as written
// in modules.dep) to the paths of the modules it needs.
type ModuleDeps map[string][]string

// ModuleName is the module name of a path: kernel/net/ipv4/udp_tunnel.ko.xz -> udp_tunnel.
// Like modprobe, it treats '-' and '_' alike (returns '_').
func ModuleName(p string) string {
	b := path.Base(p)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return strings.ReplaceAll(b, "-", "_")
}

// ParseModulesDep reads a modules.dep file.
func ParseModulesDep(r io.Reader) (ModuleDeps, error) {
	deps := ModuleDeps{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		mod, rest, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fmt.Errorf("modules.dep line %d: no colon", line)
		}
		deps[mod] = strings.Fields(rest)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading modules.dep: %w", err)
	}
	return deps, nil
}

// LoadOrder returns the module paths to insmod, dependencies first, for the
// wanted module names, each path once. Names in builtin (from
// modules.builtin, names only) are skipped; any other unknown name is an error.
func (d ModuleDeps) LoadOrder(wanted []string, builtin map[string]bool) ([]string, error) {
	byName := map[string]string{}
	for p := range d {
		byName[ModuleName(p)] = p
	}
	var order []string
	seen := map[string]bool{}
	var visit func(p string, stack []string) error
	visit = func(p string, stack []string) error {
		if seen[p] {
			return nil
		}
		for _, s := range stack {
			if s == p {
				return fmt.Errorf("dependency cycle through %s", ModuleName(p))
			}
		}
		deps, ok := d[p]
		if !ok {
			return fmt.Errorf("module %s needed by %s is not in modules.dep", p, ModuleName(stack[len(stack)-1]))
		}
		// modules.dep lists every transitive dependency; the last ones are
		// the most basic, so visit them first.
		for i := len(deps) - 1; i >= 0; i-- {
			if err := visit(deps[i], append(stack, p)); err != nil {
				return err
			}
		}
		seen[p] = true
		order = append(order, p)
		return nil
	}
	for _, n := range wanted {
		n = strings.ReplaceAll(n, "-", "_")
		p, ok := byName[n]
		if !ok {
			if builtin[n] || OptionalModules[n] {
				continue
			}
			return nil, fmt.Errorf("module %s is neither in modules.dep nor built in", n)
		}
		if err := visit(p, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// ParseBuiltin reads modules.builtin (one path a line) into a set of names.
func ParseBuiltin(r io.Reader) (map[string]bool, error) {
	set := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			set[ModuleName(t)] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading modules.builtin: %w", err)
	}
	return set, nil
}
