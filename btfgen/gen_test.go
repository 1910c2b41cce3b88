package btfgen

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/apmwatch/apmwatch/internal/modid"
)

func TestModuleName(t *testing.T) {
	for file, want := range map[string]string{"ib_core.ko": "ib_core", "ib-core.ko.xz": "ib_core", "mlx5_ib.ko.debug": "mlx5_ib",
		"rdma_cm.ko.zst": "rdma_cm", "x.ko.gz": "x", "ib_core.o": "", ".ko": "", "ib_core.ko.bak": ""} {
		got, ok := moduleName(file)
		if got != want || ok != (want != "") {
			t.Errorf("%s: %q %v, want %q", file, got, ok, want)
		}
	}
}

// blob is standalone BTF holding one struct.
func blob(t *testing.T, name string) []byte {
	t.Helper()
	i := &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	b, err := btf.NewBuilder([]btf.Type{i, &btf.Struct{Name: name, Size: 4, Members: []btf.Member{{Name: "a", Type: i}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// relocatable writes a minimal ELF64 relocatable file with the given
// sections (name -> contents), as a module file is.
func relocatable(sections map[string][]byte) []byte {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range sections {
			if !yield(n) {
				return
			}
		}
	})
	shstr := []byte{0}
	nameOff := map[string]uint32{}
	for _, n := range append(names, ".shstrtab") {
		nameOff[n] = uint32(len(shstr))
		shstr = append(append(shstr, n...), 0)
	}
	var body bytes.Buffer
	body.Write(make([]byte, 64)) // the ELF header, filled below
	type sh struct {
		name      uint32
		typ       uint32
		off, size uint64
	}
	var shs []sh
	for _, n := range names {
		shs = append(shs, sh{nameOff[n], 1 /* PROGBITS */, uint64(body.Len()), uint64(len(sections[n]))})
		body.Write(sections[n])
	}
	shs = append(shs, sh{nameOff[".shstrtab"], 3 /* STRTAB */, uint64(body.Len()), uint64(len(shstr))})
	body.Write(shstr)
	for body.Len()%8 != 0 {
		body.WriteByte(0)
	}
	shoff := uint64(body.Len())
	le := binary.LittleEndian
	body.Write(make([]byte, 64)) // the null section
	for _, s := range shs {
		var h [64]byte
		le.PutUint32(h[0:], s.name)
		le.PutUint32(h[4:], s.typ)
		le.PutUint64(h[24:], s.off)
		le.PutUint64(h[32:], s.size)
		le.PutUint64(h[48:], 1)
		body.Write(h[:])
	}
	b := body.Bytes()
	copy(b, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1})
	le.PutUint16(b[16:], 1)  // ET_REL
	le.PutUint16(b[18:], 62) // x86-64
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[40:], shoff)
	le.PutUint16(b[52:], 64)
	le.PutUint16(b[58:], 64)
	le.PutUint16(b[60:], uint16(len(shs)+1))
	le.PutUint16(b[62:], uint16(len(shs)))
	return b
}

// host is a fake host: its sysfs (vmlinux BTF, loaded modules, modules
// with their own BTF) and a module tree.
type host struct{ sysBTF, sysMod, tree, out string }

func newHost(t *testing.T, loaded ...string) host {
	d := t.TempDir()
	h := host{filepath.Join(d, "btf"), filepath.Join(d, "module"), filepath.Join(d, "lib/modules/6.12.0-test"), filepath.Join(d, "out")}
	for _, dir := range []string{h.sysBTF, h.sysMod, h.tree} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(h.sysBTF, "vmlinux"), blob(t, "task_struct"), 0o444); err != nil {
		t.Fatal(err)
	}
	for _, m := range loaded {
		if err := os.MkdirAll(filepath.Join(h.sysMod, m), 0o755); err != nil {
			t.Fatal(err)
		}
		// The loaded build: the srcversion its file's .modinfo carries.
		if err := os.WriteFile(filepath.Join(h.sysMod, m, "srcversion"), []byte("S-"+m+"\n"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h host) put(t *testing.T, rel string, b []byte) string {
	p := filepath.Join(h.tree, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (h host) opts(mods ...string) (Options, *bytes.Buffer) {
	var out bytes.Buffer
	return Options{Dir: h.out, DebugDirs: []string{h.tree}, Modules: mods, Loaded: true, Release: "6.12.0-test",
		SysBTF: h.sysBTF, SysModule: h.sysMod, Out: &out}, &out
}

// Each wanted, loaded module gets its BTF from the first file that
// serves, or one line saying exactly what is missing, and the error names
// every module missing.
func TestGen(t *testing.T) {
	h := newHost(t, "ib_core", "ib_uverbs", "ib_cm", "mlx5_ib", "rdma_ucm")
	modinfo := func(m string) []byte {
		return []byte("license=GPL\x00srcversion=S-" + m + "\x00vermagic=6.12.0-test SMP preempt mod_unload\x00")
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(relocatable(map[string][]byte{".modinfo": modinfo("ib_uverbs"), ".BTF": blob(t, "ib_uqp_object")}))
	zw.Close()
	h.put(t, "kernel/ib_core.ko", relocatable(map[string][]byte{".modinfo": modinfo("ib_core"), ".BTF": blob(t, "ib_qp")}))
	// rdma_ucm is loaded from an out-of-tree build (OFED's, in updates/):
	// the inbox file of the same release and vermagic is another build.
	os.WriteFile(filepath.Join(h.sysMod, "rdma_ucm", "taint"), []byte("O\n"), 0o444)
	h.put(t, "kernel/rdma_ucm.ko", relocatable(map[string][]byte{".modinfo": modinfo("inbox"), ".BTF": blob(t, "rdma_ucm_ctx")}))
	h.put(t, "kernel/ib_uverbs.ko.gz", gz.Bytes())
	h.put(t, "kernel/ib_cm.ko", relocatable(map[string][]byte{".modinfo": []byte("vermagic=6.1.0-other SMP\x00"), ".BTF": blob(t, "cm_work")}))
	h.put(t, "kernel/rdma_cm.ko", relocatable(map[string][]byte{".BTF": blob(t, "rdma_cm_id")})) // not loaded: not wanted
	if err := os.WriteFile(filepath.Join(h.sysBTF, "ib_umad"), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(h.sysMod, "ib_umad"), 0o755)
	o, out := h.opts("ib_core", "ib_uverbs", "ib_cm", "mlx5_ib", "ib_umad", "rdma_cm", "rdma_ucm")
	o.Pahole = "/nonexistent/pahole"
	res, err := Gen(o)
	got := map[string]string{}
	for _, r := range res {
		got[r.Module] = r.Status
	}
	want := map[string]string{"ib_core": "written", "ib_uverbs": "written", "ib_cm": "missing", "mlx5_ib": "missing", "ib_umad": "own",
		"rdma_ucm": "missing"}
	if len(got) != len(want) {
		t.Errorf("results %v, want %v", got, want)
	}
	for m, s := range want {
		if got[m] != s {
			t.Errorf("%s: %s, want %s\n%s", m, got[m], s, out)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "ib_cm, mlx5_ib, rdma_ucm") {
		t.Errorf("error %v: want one naming ib_cm, mlx5_ib and rdma_ucm", err)
	}
	for _, line := range []string{"ib_cm: missing: " + filepath.Join(h.tree, "kernel/ib_cm.ko") + " is built for 6.1.0-other",
		"mlx5_ib: missing: no mlx5_ib.ko under", "ib_umad: own:",
		"rdma_ucm: missing: " + filepath.Join(h.tree, "kernel/rdma_ucm.ko") + " is not the loaded module: rdma_ucm: the file is srcversion S-inbox, the loaded module is srcversion S-rdma_ucm, out-of-tree (taint O)",
		"rdma_ucm is loaded from an out-of-tree build"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, out)
		}
	}
	for m, st := range map[string]string{"ib_core": "ib_qp", "ib_uverbs": "ib_uqp_object"} {
		spec, err := btf.LoadSpec(filepath.Join(h.out, m+".btf"))
		var s *btf.Struct
		if err != nil || spec.TypeByName(st, &s) != nil {
			t.Errorf("%s.btf: %v, want struct %s", m, err, st)
		}
	}
	if _, err := os.Stat(filepath.Join(h.out, "rdma_cm.btf")); err == nil {
		t.Error("btf written for a module not loaded")
	}
	// Each file written carries the build it describes, the loaders' check.
	id, err := modid.ReadSidecar(filepath.Join(h.out, "ib_core.btf"))
	if err != nil || id.SrcVersion != "S-ib_core" || id.Module != "ib_core" || id.Source != filepath.Join(h.tree, "kernel/ib_core.ko") {
		t.Errorf("ib_core.btf's identity: %+v, %v", id, err)
	}
	// A planted link where the temporary file used to be is never followed.
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("root's"), 0o644)
	os.Symlink(victim, filepath.Join(h.out, "ib_core.btf.tmp"))
	if _, err := Gen(o); err == nil {
		t.Error("the second run found everything")
	}
	if b, _ := os.ReadFile(victim); string(b) != "root's" {
		t.Errorf("btf gen wrote through a planted link: %q", b)
	}
	// A directory others may write is refused.
	os.Chmod(h.out, 0o777)
	if _, err := Gen(o); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("a 0777 --dir: %v", err)
	}
}

// A module file with debug info and no .BTF goes through pahole: needs
// gcc and pahole (make setup installs both).
func TestGenPahole(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatal("gcc is needed (make setup installs it)")
	}
	pahole, err := exec.LookPath("pahole")
	if err != nil {
		t.Fatal("pahole is needed (make setup installs it)")
	}
	h := newHost(t, "apmtest")
	src := filepath.Join(t.TempDir(), "m.c")
	os.WriteFile(src, []byte("struct apm_probe_target { int qp_num; long mask; };\nstruct apm_probe_target apm_target;\n"+
		"__attribute__((section(\".modinfo\"), used)) static const char srcv[] = \"srcversion=S-apmtest\";\n"), 0o644)
	obj := filepath.Join(h.tree, "extra", "apmtest.ko")
	os.MkdirAll(filepath.Dir(obj), 0o755)
	if out, err := exec.Command(gcc, "-g", "-c", "-o", obj, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	o, out := h.opts("apmtest")
	o.Pahole = pahole
	if _, err := Gen(o); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(h.out, "apmtest.btf"))
	if err != nil {
		t.Fatal(err)
	}
	base, _ := btf.LoadSpec(filepath.Join(h.sysBTF, "vmlinux"))
	spec, err := btf.LoadSplitSpecFromReader(bytes.NewReader(b), base)
	var s *btf.Struct
	if err != nil || spec.TypeByName("apm_probe_target", &s) != nil || len(s.Members) != 2 {
		t.Errorf("pahole's btf: %v %+v\n%s", err, s, out)
	}
	if !strings.Contains(out.String(), "apmtest: written") || !strings.Contains(out.String(), "pahole on the debug info") {
		t.Errorf("report:\n%s", out)
	}
	o.Pahole = ""
	o.Modules = nil
	if _, err := Gen(o); err == nil || !strings.Contains(err.Error(), "no module wanted") {
		t.Errorf("no modules: %v", err)
	}
}
