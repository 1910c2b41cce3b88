package collector

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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

// External BTF: a module's file is taken only when the kernel has no BTF
// of its own for it; a named directory must exist, the default may not;
// a file that is not BTF, or too many files, is a clear error.
func TestExternalBTF(t *testing.T) {
	noBase := func() (*btf.Spec, error) { return nil, errors.New("no vmlinux btf here") }
	base := func() (*btf.Spec, error) {
		return btf.LoadSpecFromReader(strings.NewReader(string(standaloneBTF(t, "base"))))
	}
	sys := t.TempDir()
	if err := os.WriteFile(filepath.Join(sys, "ib_uverbs"), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Run("a module without its own btf", func(t *testing.T) {
		dir := t.TempDir()
		for name, data := range map[string][]byte{"ib_core.btf": standaloneBTF(t, "ib_qp"),
			"ib_uverbs.btf": standaloneBTF(t, "ib_uqp_object"), "vmlinux.btf": standaloneBTF(t, "x"), "README": []byte("not btf")} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ext, err := loadExtBTF(dir, true, base, sys)
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
	})
	t.Run("absent directories", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "none")
		if ext, err := loadExtBTF(missing, false, noBase, sys); err != nil || len(ext.specs) != 0 {
			t.Errorf("the default directory absent: %v %v", ext.modules, err)
		}
		if _, err := loadExtBTF(missing, true, noBase, sys); err == nil || !strings.Contains(err.Error(), "btf directory") {
			t.Errorf("--btf naming no directory: %v", err)
		}
	})
	t.Run("bad files", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "ib_core.btf"), []byte("\x9f\xeb\x01garbage"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := loadExtBTF(dir, true, base, sys)
		if err == nil || !strings.Contains(err.Error(), "ib_core.btf") || strings.Contains(err.Error(), "\n") {
			t.Errorf("a damaged file: %v", err)
		}
		if _, err := loadExtBTF(dir, true, noBase, sys); err == nil || !strings.Contains(err.Error(), "vmlinux") {
			t.Errorf("no vmlinux btf: %v", err)
		}
		many := t.TempDir()
		for i := range maxBTFFiles + 1 {
			if err := os.WriteFile(filepath.Join(many, strings.Repeat("m", 1+i%50)+string(rune('a'+i/50))+".btf"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := loadExtBTF(many, true, base, sys); err == nil || !strings.Contains(err.Error(), "at most") {
			t.Errorf("too many files: %v", err)
		}
	})
}
