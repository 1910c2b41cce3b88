// Package modid tells which build of a kernel module a file or the running
// kernel holds: its GNU build-id (the .note.gnu.build-id section of the
// file, /sys/module/M/notes/.note.gnu.build-id of the loaded module), else
// its srcversion (.modinfo, /sys/module/M/srcversion), and whether the
// loaded module is out of tree (taint O: MLNX_OFED, DOCA-OFED, DKMS). External
// BTF is taken only for the build it was made from: `apmwatch btf gen`
// records a file's identity beside the BTF it writes (MODULE.btf.id), and
// every loader compares it with the loaded module's (Match).
package modid

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ID is one module build.
type ID struct {
	Module     string `json:"module"`
	BuildID    string `json:"build_id,omitempty"`   // hex
	SrcVersion string `json:"srcversion,omitempty"` // .modinfo's srcversion
	Release    string `json:"release,omitempty"`    // vermagic's kernel release
	OutOfTree  bool   `json:"out_of_tree,omitempty"`
	Source     string `json:"source,omitempty"` // the file it was read from
}

// Bounds: notes and sidecar files are small; anything larger is not one.
const (
	maxNote    = 4 << 10
	maxSidecar = 16 << 10
	maxField   = 128
)

// String names the build in one short phrase.
func (id ID) String() string {
	var parts []string
	if id.BuildID != "" {
		parts = append(parts, "build-id "+id.BuildID)
	}
	if id.SrcVersion != "" {
		parts = append(parts, "srcversion "+id.SrcVersion)
	}
	if len(parts) == 0 {
		parts = append(parts, "no build-id or srcversion")
	}
	s := strings.Join(parts, ", ")
	if id.OutOfTree {
		s += ", out-of-tree (taint O)"
	}
	return s
}

// FromELF reads a module file's identity: its build-id note and .modinfo.
func FromELF(module string, f *elf.File) ID {
	id := ID{Module: module}
	if s := f.Section(".note.gnu.build-id"); s != nil && s.Type == elf.SHT_NOTE {
		if b, err := s.Data(); err == nil {
			id.BuildID, _ = parseBuildIDNote(b, f.ByteOrder)
		}
	}
	if s := f.Section(".modinfo"); s != nil && s.Type != elf.SHT_NOBITS {
		if b, err := s.Data(); err == nil {
			for _, kv := range bytes.Split(b, []byte{0}) {
				if v, ok := bytes.CutPrefix(kv, []byte("srcversion=")); ok {
					id.SrcVersion = clean(string(v))
				}
				if v, ok := bytes.CutPrefix(kv, []byte("vermagic=")); ok {
					r, _, _ := strings.Cut(string(v), " ")
					id.Release = clean(r)
				}
			}
		}
	}
	return id
}

// Loaded reads the identity of module m as the kernel runs it, from sys
// (/sys/module). ok is false when m is not loaded.
func Loaded(sys, m string) (id ID, ok bool, err error) {
	dir := filepath.Join(sys, m)
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return ID{Module: m}, false, nil
		}
		return ID{Module: m}, false, fmt.Errorf("reading module %s: %w", m, err)
	}
	id = ID{Module: m}
	if b, err := readSmall(filepath.Join(dir, "notes", ".note.gnu.build-id"), maxNote); err == nil {
		id.BuildID, _ = parseBuildIDNote(b, binary.NativeEndian)
	}
	if b, err := readSmall(filepath.Join(dir, "srcversion"), maxField); err == nil {
		id.SrcVersion = clean(strings.TrimSpace(string(b)))
	}
	if b, err := readSmall(filepath.Join(dir, "taint"), maxField); err == nil {
		id.OutOfTree = strings.ContainsRune(string(b), 'O')
	}
	return id, true, nil
}

// Match says whether file (what a BTF file was made from) is the build
// loaded runs: the build-ids when both have one, else the srcversions. A
// mismatch, or nothing to compare, is an error naming both.
func Match(file, loaded ID) error {
	switch {
	case file.BuildID != "" && loaded.BuildID != "":
		if file.BuildID == loaded.BuildID {
			return nil
		}
	case file.SrcVersion != "" && loaded.SrcVersion != "":
		if file.SrcVersion == loaded.SrcVersion {
			return nil
		}
	default:
		return fmt.Errorf("%s: nothing to compare: the file has %s, the loaded module %s", loaded.Module, file, loaded)
	}
	return fmt.Errorf("%s: the file is %s, the loaded module is %s", loaded.Module, file, loaded)
}

// SidecarPath is where the identity of DIR/MODULE.btf is kept.
func SidecarPath(btfPath string) string { return btfPath + ".id" }

// ReadSidecar reads a BTF file's recorded identity.
func ReadSidecar(btfPath string) (ID, error) {
	var id ID
	b, err := readSmall(SidecarPath(btfPath), maxSidecar)
	if err != nil {
		return id, err
	}
	if err := json.Unmarshal(b, &id); err != nil {
		return id, fmt.Errorf("%s: not an identity record: %w", SidecarPath(btfPath), err)
	}
	id.Module, id.BuildID, id.SrcVersion = clean(id.Module), clean(id.BuildID), clean(id.SrcVersion)
	id.Release, id.Source = clean(id.Release), cleanLong(id.Source)
	return id, nil
}

// Marshal is the sidecar's content.
func (id ID) Marshal() []byte {
	b, _ := json.MarshalIndent(id, "", "  ")
	return append(b, '\n')
}

// parseBuildIDNote finds the GNU build-id (type 3, name "GNU") in a run
// of ELF notes.
func parseBuildIDNote(b []byte, bo binary.ByteOrder) (string, bool) {
	for len(b) >= 12 {
		namesz, descsz, typ := bo.Uint32(b[0:]), bo.Uint32(b[4:]), bo.Uint32(b[8:])
		b = b[12:]
		nlen, dlen := align4(namesz), align4(descsz)
		if namesz > maxNote || descsz > maxNote || uint64(len(b)) < uint64(nlen)+uint64(dlen) {
			return "", false
		}
		name, desc := b[:namesz], b[nlen:nlen+descsz]
		b = b[nlen+dlen:]
		if typ == 3 && string(bytes.TrimRight(name, "\x00")) == "GNU" && descsz > 0 && descsz <= 64 {
			return hex.EncodeToString(desc), true
		}
	}
	return "", false
}

func align4(n uint32) uint32 { return (n + 3) &^ 3 }

func readSmall(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return b, nil
}

// clean keeps an identity field printable and short: it comes from files.
func clean(s string) string { return trim(s, maxField) }

func cleanLong(s string) string { return trim(s, 1024) }

func trim(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r > 0x7e {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n]
	}
	return s
}
