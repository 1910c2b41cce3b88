package btfgen

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/apmwatch/apmwatch/internal/modid"
)

// paholeFor bounds one pahole run: a large module takes well under a
// second.
const paholeFor = 2 * time.Minute

// module is one parsed module file.
type module struct {
	path     string
	raw      []byte
	f        *elf.File
	vermagic string // "" when the file has none (a separate debug file)
	id       modid.ID
}

func parseModule(path string) (*module, error) {
	raw, err := readModule(path)
	if err != nil {
		return nil, err
	}
	f, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: not an ELF file: %w", path, err)
	}
	m := &module{path: path, raw: raw, f: f}
	if s := f.Section(".modinfo"); s != nil && s.Type != elf.SHT_NOBITS {
		if b, err := s.Data(); err == nil {
			for _, kv := range bytes.Split(b, []byte{0}) {
				if v, ok := bytes.CutPrefix(kv, []byte("vermagic=")); ok {
					m.vermagic, _, _ = strings.Cut(string(v), " ")
				}
			}
		}
	}
	return m, nil
}

// section returns the module's own .BTF section (split against the vmlinux
// it was built with), if it has one.
func (m *module) section() ([]byte, bool) {
	s := m.f.Section(".BTF")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil, false
	}
	b, err := s.Data()
	return b, err == nil && len(b) > 0
}

// hasDWARF reports whether the file carries debug info pahole can read.
func (m *module) hasDWARF() bool {
	s := m.f.Section(".debug_info")
	return s != nil && s.Type != elf.SHT_NOBITS && s.Size > 0
}

// pahole encodes the module's DWARF as BTF split against base (the
// running kernel's vmlinux BTF file), into out.
func (m *module) pahole(pahole, base, out string) error {
	in := m.path
	if ext := filepath.Ext(in); ext == ".xz" || ext == ".gz" || ext == ".zst" {
		tmp, err := os.CreateTemp(filepath.Dir(out), ".module-*.ko")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		if _, err := tmp.Write(m.raw); err != nil {
			tmp.Close()
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		in = tmp.Name()
	}
	ctx, cancel := context.WithTimeout(context.Background(), paholeFor)
	defer cancel()
	cmd := exec.CommandContext(ctx, pahole, "--btf_encode_detached="+out, "--btf_base="+base, in)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &errb, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pahole on %s: %w: %s", m.path, err, firstLine(errb.String()))
	}
	return nil
}

// parseModuleBTF reads a module's BTF: standalone, else split against
// base (split says which).
func parseModuleBTF(b []byte, base *btf.Spec) (spec *btf.Spec, split bool, err error) {
	if spec, err := btf.LoadSpecFromReader(bytes.NewReader(b)); err == nil {
		return spec, false, nil
	}
	spec, err = btf.LoadSplitSpecFromReader(bytes.NewReader(b), base)
	if err != nil {
		return nil, true, fmt.Errorf("not BTF split against this kernel's vmlinux: %w", err)
	}
	return spec, true, nil
}

// checkSplit parses b as BTF split against base: what the collector will
// do with it (standalone first, as it does).
func checkSplit(b []byte, base *btf.Spec) error {
	if _, err := btf.LoadSpecFromReader(bytes.NewReader(b)); err == nil {
		return nil
	}
	spec, err := btf.LoadSplitSpecFromReader(bytes.NewReader(b), base)
	if err != nil {
		return fmt.Errorf("not BTF split against this kernel's vmlinux: %w", err)
	}
	n := 0
	for range spec.All() {
		if n++; n > 1 {
			return nil
		}
	}
	return fmt.Errorf("holds no type")
}
