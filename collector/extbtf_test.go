package collector

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/internal/modid"
	"github.com/cilium/ebpf/btf"
)

// standaloneBTF is a small standalone BTF blob holding struct name.
func standaloneBTF(t *testing.T, name string) []byte {
	t.Helper()
	i := &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	st := &btf.Struct{Name: name, Size: 4, Members: []btf.Member{{Name: "qp_num", Type: i}}}
	b, err := btf.NewBuilder([]btf.Type{i, st}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := b.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fakeSys is a /sys/kernel/btf and a /sys/module: ib_uverbs has its own
// BTF, ib_core and ib_cm are loaded (ib_core out of tree, build-id abcd),
// mlx5_ib is not loaded.
func fakeSys(t *testing.T) (sysBTF, sysMod string) {
	t.Helper()
	sysBTF, sysMod = t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(sysBTF, "ib_uverbs"), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	for m, bid := range map[string][]byte{"ib_core": {0xab, 0xcd}, "ib_cm": {0x12, 0x34}, "ib_uverbs": {0x56}} {
		notes := filepath.Join(sysMod, m, "notes")
		if err := os.MkdirAll(notes, 0o755); err != nil {
			t.Fatal(err)
		}
		note := make([]byte, 16, 16+len(bid))
		binary.NativeEndian.PutUint32(note[0:], 4)
		binary.NativeEndian.PutUint32(note[4:], uint32(len(bid)))
		binary.NativeEndian.PutUint32(note[8:], 3)
		copy(note[12:], "GNU\x00")
		note = append(note, bid...)
		for len(note)%4 != 0 {
			note = append(note, 0)
		}
		if err := os.WriteFile(filepath.Join(notes, ".note.gnu.build-id"), note, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(sysMod, "ib_core", "taint"), []byte("O\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	return sysBTF, sysMod
}

// writeBTF puts MODULE.btf and, unless id is nil, its identity record.
func writeBTF(t *testing.T, dir, mod string, data []byte, id *modid.ID) {
	t.Helper()
	p := filepath.Join(dir, mod+".btf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if id != nil {
		if err := os.WriteFile(modid.SidecarPath(p), id.Marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func testExtDir(t *testing.T, dir string, explicit bool) extDir {
	sysBTF, sysMod := fakeSys(t)
	local, err := ProgramBTF()
	if err != nil {
		t.Fatal(err)
	}
	return extDir{dir: dir, explicit: explicit, sysBTF: sysBTF, sysMod: sysMod, local: local,
		modules: []string{"ib_core", "ib_cm", "ib_uverbs", "mlx5_ib"}}
}

// External BTF: a module's file is taken only when the kernel has no BTF
// of its own for it, the module is one the probes read and is loaded, and
// the file's recorded build is the loaded one; a named directory must
// exist, the default may not; a file that is not BTF, too many files, a
// directory or file others may write, a link: a clear error.
func TestExternalBTF(t *testing.T) {
	noBase := func() (*btf.Spec, error) { return nil, errors.New("no vmlinux btf here") }
	base := func() (*btf.Spec, error) {
		return btf.LoadSpecFromReader(strings.NewReader(string(standaloneBTF(t, "base"))))
	}
	core := &modid.ID{Module: "ib_core", BuildID: "abcd"}
	t.Run("a module without its own btf", func(t *testing.T) {
		dir := t.TempDir()
		writeBTF(t, dir, "ib_core", standaloneBTF(t, "ib_qp"), core)
		writeBTF(t, dir, "ib_uverbs", standaloneBTF(t, "ib_uqp_object"), &modid.ID{BuildID: "56"})
		writeBTF(t, dir, "vmlinux", standaloneBTF(t, "x"), nil)
		writeBTF(t, dir, "nvme", standaloneBTF(t, "ib_qp"), &modid.ID{BuildID: "99"})
		writeBTF(t, dir, "mlx5_ib", standaloneBTF(t, "ib_qp"), &modid.ID{BuildID: "99"})
		os.WriteFile(filepath.Join(dir, "README"), []byte("not btf"), 0o644)
		ext, err := loadExtBTF(testExtDir(t, dir, true), base)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ext.modules, []string{"ib_core"}) || len(ext.specs) != 1 {
			t.Fatalf("modules %v (%d specs), want ib_core alone (ib_uverbs has its own, vmlinux is the kernel's)", ext.modules, len(ext.specs))
		}
		var st *btf.Struct
		if err := ext.specs[0].TypeByName("ib_qp", &st); err != nil {
			t.Errorf("ib_core's types: %v", err)
		}
		if len(ext.ignored) != 2 || !strings.Contains(strings.Join(ext.ignored, "|"), "no probe reads module nvme") ||
			!strings.Contains(strings.Join(ext.ignored, "|"), "mlx5_ib is not loaded") {
			t.Errorf("ignored: %q, want nvme (no probe reads it) and mlx5_ib (not loaded)", ext.ignored)
		}
	})
	t.Run("another build than the loaded module", func(t *testing.T) {
		dir := t.TempDir()
		// Made from the inbox file of the same release under an OFED ib_core.
		writeBTF(t, dir, "ib_core", standaloneBTF(t, "ib_qp"), &modid.ID{Module: "ib_core", BuildID: "ffff", Source: "/lib/modules/r/kernel/ib_core.ko"})
		_, err := loadExtBTF(testExtDir(t, dir, true), base)
		if err == nil || !strings.Contains(err.Error(), "build-id ffff") || !strings.Contains(err.Error(), "build-id abcd") ||
			!strings.Contains(err.Error(), "out-of-tree") || strings.Contains(err.Error(), "\n") {
			t.Errorf("a stale file: %v, want one line naming both builds", err)
		}
		dir = t.TempDir()
		writeBTF(t, dir, "ib_core", standaloneBTF(t, "ib_qp"), nil)
		if _, err := loadExtBTF(testExtDir(t, dir, true), base); err == nil || !strings.Contains(err.Error(), "btf gen") {
			t.Errorf("a file with no identity: %v", err)
		}
	})
	t.Run("absent directories", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "none")
		if ext, err := loadExtBTF(testExtDir(t, missing, false), noBase); err != nil || len(ext.specs) != 0 {
			t.Errorf("the default directory absent: %v %v", ext.modules, err)
		}
		if _, err := loadExtBTF(testExtDir(t, missing, true), noBase); err == nil || !strings.Contains(err.Error(), "btf directory") {
			t.Errorf("--btf naming no directory: %v", err)
		}
	})
	t.Run("bad files", func(t *testing.T) {
		dir := t.TempDir()
		writeBTF(t, dir, "ib_core", []byte("\x9f\xeb\x01garbage"), core)
		_, err := loadExtBTF(testExtDir(t, dir, true), base)
		if err == nil || !strings.Contains(err.Error(), "ib_core.btf") || strings.Contains(err.Error(), "\n") {
			t.Errorf("a damaged file: %v", err)
		}
		if _, err := loadExtBTF(testExtDir(t, dir, true), noBase); err == nil || !strings.Contains(err.Error(), "vmlinux") {
			t.Errorf("no vmlinux btf: %v", err)
		}
		many := t.TempDir()
		for i := range maxBTFFiles + 1 {
			if err := os.WriteFile(filepath.Join(many, strings.Repeat("m", 1+i%50)+string(rune('a'+i/50))+".btf"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := loadExtBTF(testExtDir(t, many, true), base); err == nil || !strings.Contains(err.Error(), "at most") {
			t.Errorf("too many files: %v", err)
		}
	})
	t.Run("who may write", func(t *testing.T) {
		dir := t.TempDir()
		writeBTF(t, dir, "ib_core", standaloneBTF(t, "ib_qp"), core)
		os.Chmod(dir, 0o777)
		if _, err := loadExtBTF(testExtDir(t, dir, true), base); err == nil || !strings.Contains(err.Error(), "writable by others") {
			t.Errorf("a 0777 directory: %v", err)
		}
		os.Chmod(dir, 0o755)
		os.Chmod(filepath.Join(dir, "ib_core.btf"), 0o666)
		if _, err := loadExtBTF(testExtDir(t, dir, true), base); err == nil || !strings.Contains(err.Error(), "writable by others") {
			t.Errorf("a 0666 file: %v", err)
		}
		os.Remove(filepath.Join(dir, "ib_core.btf"))
		other := filepath.Join(t.TempDir(), "elsewhere.btf")
		os.WriteFile(other, standaloneBTF(t, "ib_qp"), 0o644)
		os.Symlink(other, filepath.Join(dir, "ib_core.btf"))
		if _, err := loadExtBTF(testExtDir(t, dir, true), base); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("a link: %v", err)
		}
	})
	t.Run("a type defined too often", func(t *testing.T) {
		var types []btf.Type
		for range maxCandidates + 1 {
			types = append(types, &btf.Struct{Name: "ib_qp", Size: 4})
		}
		b, err := btf.NewBuilder(types, nil)
		if err != nil {
			t.Fatal(err)
		}
		data, err := b.Marshal(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		writeBTF(t, dir, "ib_core", data, core)
		if _, err := loadExtBTF(testExtDir(t, dir, true), base); err == nil || !strings.Contains(err.Error(), "defines ib_qp") {
			t.Errorf("%d ib_qp: %v", maxCandidates+1, err)
		}
	})
}
