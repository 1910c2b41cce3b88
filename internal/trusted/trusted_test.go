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
	// Under a parent anyone may write: refused with parents checked.
	// Under a sticky one (/tmp, 1777), taken: nobody can rename it away.
	open := filepath.Join(t.TempDir(), "open")
	sub := filepath.Join(open, "btf")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	if err := Dir(sub, true); err == nil || !strings.Contains(err.Error(), "above") {
		t.Errorf("a directory under a 0777 parent, parents checked: %v", err)
	}
	if err := Dir(sub, false); err != nil {
		t.Errorf("the same, parents not checked: %v", err)
	}
	os.Chmod(open, os.ModeSticky|0o777)
	if err := Dir(sub, true); err != nil {
		t.Errorf("a directory under a sticky 1777 parent: %v", err)
	}
	// Another user's file is refused.
	other := filepath.Join(dir, "other.btf")
	os.WriteFile(other, []byte("x"), 0o644)
	if os.Geteuid() == 0 {
		if err := os.Chown(other, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if _, _, err := Open(other); err == nil || !strings.Contains(err.Error(), "uid 12345") {
			t.Errorf("another user's file: %v", err)
		}
	}
	// A planted file where one is to be created is never followed.
	planted := filepath.Join(dir, "ib_core.btf.tmp")
	os.Symlink(good, planted)
	if f, err := CreateExcl(planted, 0o644); err == nil {
		f.Close()
		t.Error("CreateExcl followed a planted link")
	}
}
