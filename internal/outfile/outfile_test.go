package outfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// withUmask runs f under umask u (process-wide: these tests are not parallel).
func withUmask(u int, f func()) {
	old := syscall.Umask(u)
	defer syscall.Umask(old)
	f()
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestModesWhateverTheUmask(t *testing.T) {
	for _, u := range []int{0, 0o022, 0o077} {
		dir := t.TempDir()
		withUmask(u, func() {
			f, err := Create(filepath.Join(dir, "a.rec"), os.O_TRUNC)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			if err := WriteFile(filepath.Join(dir, "r.html"), []byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := MkdirAll(filepath.Join(dir, "d", "e")); err != nil {
				t.Fatal(err)
			}
		})
		if m := mode(t, filepath.Join(dir, "a.rec")); m != FileMode {
			t.Errorf("umask %03o: file mode %v, want %v", u, m, FileMode)
		}
		if m := mode(t, filepath.Join(dir, "r.html")); m != FileMode {
			t.Errorf("umask %03o: WriteFile mode %v", u, m)
		}
		if m := mode(t, filepath.Join(dir, "d", "e")); m != DirMode {
			t.Errorf("umask %03o: dir mode %v, want %v", u, m, DirMode)
		}
	}
}

// An existing file is appended to (a log) or truncated (a recording
// written again), and keeps the mode its owner gave it.
func TestExistingFileKeepsMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "findings.jsonl")
	if err := os.WriteFile(p, []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Create(p, os.O_APPEND)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("two\n")
	f.Close()
	b, _ := os.ReadFile(p)
	if string(b) != "one\ntwo\n" || mode(t, p) != 0o600 {
		t.Fatalf("append: %q %v", b, mode(t, p))
	}
}

// A symbolic link at the output path is refused, dangling or not, and the
// file it points to is untouched.
func TestSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "victim")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{target, filepath.Join(dir, "missing")} {
		link := filepath.Join(dir, "out-"+filepath.Base(to))
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
		for _, flag := range []int{os.O_TRUNC, os.O_APPEND} {
			_, err := Create(link, flag)
			if !errors.Is(err, ErrSymlink) || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), link) {
				t.Fatalf("Create(%s): %v", link, err)
			}
		}
		if err := WriteFile(link, []byte("x")); !errors.Is(err, ErrSymlink) {
			t.Fatalf("WriteFile through a link: %v", err)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatalf("the link's target changed: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a dangling link's target was created")
	}
	dlink := filepath.Join(dir, "dirlink")
	os.Symlink(dir, dlink)
	if err := MkdirAll(dlink); !errors.Is(err, ErrSymlink) {
		t.Fatalf("MkdirAll through a link: %v", err)
	}
}

// A state directory must be this user's and writable by no one else.
func TestOwnDir(t *testing.T) {
	d := t.TempDir()
	if err := OwnDir(d); err != nil {
		t.Fatalf("own 0700 directory: %v", err)
	}
	shared := filepath.Join(d, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := OwnDir(shared); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("a world-writable directory: %v", err)
	}
	link := filepath.Join(d, "link")
	if err := os.Symlink(d, link); err != nil {
		t.Fatal(err)
	}
	if err := OwnDir(link); !errors.Is(err, ErrSymlink) {
		t.Errorf("a symbolic link: %v", err)
	}
	file := filepath.Join(d, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := OwnDir(file); err == nil {
		t.Error("a file accepted as a directory")
	}
	// Another user's directory: needs root to make (make test runs as root).
	if os.Geteuid() != 0 {
		t.Log("not root: the other user's directory is not checked here (make test runs as root)")
		return
	}
	theirs := filepath.Join(d, "theirs")
	if err := os.Mkdir(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := OwnDir(theirs); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("another user's directory: %v", err)
	}
}
