package btfgen

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/apmwatch/apmwatch/internal/modid"
	"github.com/apmwatch/apmwatch/internal/trusted"
)

// Options say what to write where.
type Options struct {
	Dir       string   // where MODULE.btf files go
	DebugDirs []string // searched first (a -dbg package's tree, an OFED debug build)
	Modules   []string // the modules wanted (apmwatch's hooks' modules)
	// Loaded limits Modules to those loaded now (/sys/module/MODULE);
	// modules named on the command line are wanted loaded or not.
	Loaded    bool
	Force     bool   // also for modules whose BTF the kernel has
	Release   string // the running kernel (uname -r): the files' vermagic must match
	SysBTF    string // /sys/kernel/btf
	SysModule string // /sys/module
	Pahole    string // "" to look it up on PATH
	// Min keeps of each module only the types apmwatch's programs read
	// (Minimize); Local is the programs' BTF (collector.ProgramBTF).
	Min   bool
	Local *btf.Spec
	Out   io.Writer
}

// DefaultDebugDirs are where module files are looked for after
// Options.DebugDirs: distribution debug trees, then the modules
// themselves (whose .BTF section serves when present).
func DefaultDebugDirs(release string) []string {
	return []string{
		filepath.Join("/usr/lib/debug/lib/modules", release),
		filepath.Join("/usr/lib/debug/usr/lib/modules", release),
		filepath.Join("/lib/modules", release),
		filepath.Join("/usr/lib/modules", release),
	}
}

// Result is what became of one module.
type Result struct {
	Module string
	Status string // "written", "own" (the kernel has its BTF), "missing"
	Detail string
}

// Gen writes the BTF of every wanted module it can, one line each on Out,
// and returns an error naming the modules it could not.
func Gen(o Options) ([]Result, error) {
	if o.Min && o.Local == nil {
		return nil, errors.New("--min needs the programs' btf")
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("making the btf directory: %w", err)
	}
	// The probes take what is written here as the layout of the kernel's
	// objects: a directory another user may write to is refused, as the
	// loaders refuse it.
	if err := trusted.Dir(o.Dir, false); err != nil {
		return nil, fmt.Errorf("btf directory: %w", err)
	}
	basePath := filepath.Join(o.SysBTF, "vmlinux")
	base, err := btf.LoadSpec(basePath)
	if err != nil {
		return nil, fmt.Errorf("reading this kernel's vmlinux btf: %w", err)
	}
	var mods []string
	for _, m := range o.Modules {
		if _, err := os.Stat(filepath.Join(o.SysModule, m)); o.Loaded && err != nil {
			continue
		}
		if !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
	}
	if len(mods) == 0 {
		return nil, errNoModules
	}
	want := map[string]bool{}
	for _, m := range mods {
		want[m] = true
	}
	files, err := index(append(slices.Clone(o.DebugDirs), DefaultDebugDirs(o.Release)...), want)
	if err != nil {
		return nil, err
	}
	pahole := o.Pahole
	if pahole == "" {
		pahole, _ = exec.LookPath("pahole")
	}
	var out []Result
	var missing []string
	for _, m := range mods {
		r := one(o, m, files[m], base, basePath, pahole)
		out = append(out, r)
		fmt.Fprintf(o.Out, "%s: %s: %s\n", r.Module, r.Status, r.Detail)
		if r.Status == "missing" {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("no btf for %s (each line above says what is missing)", strings.Join(missing, ", "))
	}
	return out, nil
}

// one writes module m's BTF from the first of its files that serves.
func one(o Options, m string, files []string, base *btf.Spec, basePath, pahole string) Result {
	if _, err := os.Stat(filepath.Join(o.SysBTF, m)); err == nil && !o.Force {
		return Result{m, "own", "the kernel has its btf (" + filepath.Join(o.SysBTF, m) + "): not needed"}
	}
	if len(files) == 0 {
		return Result{m, "missing", "no " + m + ".ko under " + strings.Join(append(slices.Clone(o.DebugDirs), DefaultDebugDirs(o.Release)...), ", ") +
			": install the module's debug info (a -dbg or debuginfo package) or name its directory with --debug-dir"}
	}
	dst := filepath.Join(o.Dir, m+".btf")
	loaded, isLoaded, err := modid.Loaded(o.SysModule, m)
	if err != nil {
		return Result{m, "missing", err.Error()}
	}
	var why []string
	for _, path := range files {
		mod, err := parseModule(path)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		if mod.vermagic != "" && o.Release != "" && mod.vermagic != o.Release {
			why = append(why, path+" is built for "+mod.vermagic)
			continue
		}
		// The same release is not the same build: an OFED module
		// replaces the inbox file of the same name and vermagic.
		mod.id = modid.FromELF(m, mod.f)
		mod.id.Source = path
		if isLoaded {
			if err := modid.Match(mod.id, loaded); err != nil {
				why = append(why, path+" is not the loaded module: "+err.Error())
				continue
			}
			mod.id.OutOfTree = loaded.OutOfTree
		} else if mod.id.BuildID == "" && mod.id.SrcVersion == "" {
			why = append(why, path+" has no build-id or srcversion to tell its build by")
			continue
		}
		if b, ok := mod.section(); ok {
			if err := checkSplit(b, base); err != nil {
				why = append(why, path+": its .BTF section: "+err.Error())
				continue
			}
			return write(o, mod.id, dst, b, base, "the .BTF section of "+path)
		}
		if !mod.hasDWARF() {
			why = append(why, path+" has neither a .BTF section nor debug info")
			continue
		}
		if pahole == "" {
			why = append(why, path+" has debug info, but pahole is not installed (Debian: apt install pahole; RHEL: dnf install dwarves)")
			continue
		}
		b, err := paholeOut(mod, pahole, basePath, dst, base)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		return write(o, mod.id, dst, b, base, "pahole on the debug info of "+path)
	}
	if loaded.OutOfTree {
		why = append(why, m+" is loaded from an out-of-tree build (taint O): its BTF must come from that build (docs/audit.md, \"Hosts with MLNX_OFED / DOCA-OFED\")")
	}
	return Result{m, "missing", strings.Join(why, "; ")}
}

// paholeOut runs pahole into a temporary file beside dst, checks what it
// wrote and returns it.
func paholeOut(mod *module, pahole, basePath, dst string, base *btf.Spec) ([]byte, error) {
	dir, err := os.MkdirTemp(filepath.Dir(dst), ".pahole-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, filepath.Base(dst))
	if err := mod.pahole(pahole, basePath, tmp); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(tmp)
	if err != nil {
		return nil, err
	}
	if err := checkSplit(b, base); err != nil {
		return nil, fmt.Errorf("pahole's output for %s: %w", mod.path, err)
	}
	return b, nil
}

// write puts the BTF b of module build id (from what says from) at dst,
// minimized first with Options.Min, and the build's identity beside it.
func write(o Options, id modid.ID, dst string, b []byte, base *btf.Spec, from string) Result {
	m := id.Module
	detail := fmt.Sprintf("%s (%s, %d KiB)", dst, from, (len(b)+1023)/1024)
	if o.Min {
		spec, split, err := parseModuleBTF(b, base)
		if err != nil {
			return Result{m, "missing", err.Error()}
		}
		min, err := Minimize(spec, split, base, o.Local)
		if err != nil {
			return Result{m, "missing", fmt.Sprintf("minimizing the btf of %s: %v", from, err)}
		}
		detail = fmt.Sprintf("%s (%s, %d KiB, minimized to %d KiB: the types apmwatch reads)", dst, from, (len(b)+1023)/1024, (len(min)+1023)/1024)
		b = min
	}
	// The identity first: a file is never in place without the record
	// of the build it describes.
	if err := writeAtomic(modid.SidecarPath(dst), id.Marshal()); err != nil {
		return Result{m, "missing", err.Error()}
	}
	if err := writeAtomic(dst, b); err != nil {
		return Result{m, "missing", err.Error()}
	}
	if id.OutOfTree {
		detail += "; " + m + " is out of tree (taint O), " + id.String()
	}
	return Result{m, "written", detail}
}

// writeAtomic writes a new file beside dst (O_EXCL, a name nobody could
// plant a link at in advance) and renames it into place.
func writeAtomic(dst string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+"-*")
	if err != nil {
		return fmt.Errorf("writing btf: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing btf: %w", err)
	}
	return nil
}

var errNoModules = errors.New("no module wanted: none of apmwatch's modules is loaded (name them with --module)")
