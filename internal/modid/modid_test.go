package modid

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// note builds one ELF note as the kernel and the linker write it.
func note(name string, typ uint32, desc []byte) []byte {
	bo := binary.NativeEndian
	n := append([]byte(name), 0)
	b := make([]byte, 12)
	bo.PutUint32(b[0:], uint32(len(n)))
	bo.PutUint32(b[4:], uint32(len(desc)))
	bo.PutUint32(b[8:], typ)
	b = append(b, n...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	b = append(b, desc...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func TestParseBuildIDNote(t *testing.T) {
	desc := []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	// Another note first (Linux's own), then the build-id.
	b := append(note("Linux", 0x100, []byte{1, 2, 3}), note("GNU", 3, desc)...)
	got, ok := parseBuildIDNote(b, binary.NativeEndian)
	if !ok || got != "deadbeef0102030405060708090a0b0c0d0e0f10" {
		t.Fatalf("parseBuildIDNote = %q, %v", got, ok)
	}
	// Truncated or lying sizes are no build-id, never a panic.
	for _, bad := range [][]byte{b[:20], note("GNU", 3, nil), {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 3, 0, 0, 0}} {
		if got, ok := parseBuildIDNote(bad, binary.NativeEndian); ok {
			t.Errorf("parseBuildIDNote(%x) = %q, want none", bad, got)
		}
	}
}

func TestLoadedAndMatch(t *testing.T) {
	sys := t.TempDir()
	dir := filepath.Join(sys, "ib_core")
	if err := os.MkdirAll(filepath.Join(dir, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "notes", ".note.gnu.build-id"), note("GNU", 3, []byte{0xab, 0xcd}), 0o444)
	os.WriteFile(filepath.Join(dir, "srcversion"), []byte("0123ABC\n"), 0o444)
	os.WriteFile(filepath.Join(dir, "taint"), []byte("OE\n"), 0o444)

	id, ok, err := Loaded(sys, "ib_core")
	if err != nil || !ok {
		t.Fatalf("Loaded: %v, %v", ok, err)
	}
	if id.BuildID != "abcd" || id.SrcVersion != "0123ABC" || !id.OutOfTree {
		t.Fatalf("Loaded = %+v", id)
	}
	if _, ok, err := Loaded(sys, "ib_cm"); ok || err != nil {
		t.Errorf("Loaded(not loaded) = %v, %v", ok, err)
	}

	if err := Match(ID{Module: "ib_core", BuildID: "abcd"}, id); err != nil {
		t.Errorf("same build-id: %v", err)
	}
	// The inbox file of the same release under an OFED module: refused,
	// naming both and saying the loaded one is out of tree.
	err = Match(ID{Module: "ib_core", BuildID: "1234", Source: "/lib/modules/x/kernel/ib_core.ko"}, id)
	if err == nil || !strings.Contains(err.Error(), "build-id 1234") || !strings.Contains(err.Error(), "build-id abcd") ||
		!strings.Contains(err.Error(), "out-of-tree") {
		t.Errorf("different build-id: %v", err)
	}
	// srcversion only where no build-id exists.
	if err := Match(ID{SrcVersion: "0123ABC"}, ID{Module: "m", SrcVersion: "0123ABC"}); err != nil {
		t.Errorf("same srcversion: %v", err)
	}
	if err := Match(ID{SrcVersion: "X"}, ID{Module: "m", SrcVersion: "Y"}); err == nil {
		t.Error("different srcversion matched")
	}
	if err := Match(ID{}, ID{Module: "m"}); err == nil {
		t.Error("nothing to compare matched")
	}
}

func TestSidecarRoundTripAndHostile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ib_core.btf")
	id := ID{Module: "ib_core", BuildID: "abcd", Release: "6.1.0-57-amd64", Source: "/x/ib_core.ko"}
	if err := os.WriteFile(SidecarPath(p), id.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSidecar(p)
	if err != nil || got != id {
		t.Fatalf("ReadSidecar = %+v, %v", got, err)
	}
	os.WriteFile(SidecarPath(p), []byte(`{"module":"ib_core\u001b[31m","build_id":"ab\ncd"}`), 0o644)
	if got, err := ReadSidecar(p); err != nil || got.Module != "ib_core[31m" || got.BuildID != "abcd" {
		t.Errorf("control characters kept: %+v, %v", got, err)
	}
	os.WriteFile(SidecarPath(p), make([]byte, maxSidecar+1), 0o644)
	if _, err := ReadSidecar(p); err == nil {
		t.Error("an oversized sidecar was read")
	}
}
