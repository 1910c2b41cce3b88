package trusted

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDirAndOpen(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Dir(dir, false); err != nil {
		t.Fatalf("a 0755 directory of this user: %v", err)
	}
	good := filepath.Join(dir, "ib_core.btf")
	os.WriteFile(good, []byte("x"), 0o644)
	f, _, err := Open(good)
	if err != nil {
		t.Fatalf("a 0644 file of this user: %v", err)
	}
	f.Close()

	for _, mode := range []os.FileMode{0o775, 0o777} {
		os.Chmod(dir, mode)
		if err := Dir(dir, false); err == nil || !strings.Contains(err.Error(), "writable by others") {
			t.Errorf("directory mode %04o: %v", mode, err)
		}
	}
	os.Chmod(dir, 0o755)
	os.Chmod(good, 0o666)
	if _, _, err := Open(good); err == nil {
		t.Error("a 0666 file was opened")
	}
	link := filepath.Join(dir, "link.btf")
	os.Symlink(good, link)
	if _, _, err := Open(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a link: %v", err)
	}
	ldir := filepath.Join(t.TempDir(), "dirlink")
	os.Symlink(dir, ldir)
	if err := Dir(ldir, false); err == nil {
		t.Error("a link to a directory was taken")
	}
	// The temp dir's parents include /tmp (1777): refused with parents.
	if err := Dir(dir, true); err == nil {
		t.Error("a directory under a world-writable parent was taken with parents checked")
	}
	// A planted file where one is to be created is never followed.
	planted := filepath.Join(dir, "ib_core.btf.tmp")
	os.Symlink(good, planted)
	if f, err := CreateExcl(planted, 0o644); err == nil {
		f.Close()
		t.Error("CreateExcl followed a planted link")
	}
}
