// Package trusted opens what a root process takes as instructions from the
// file system (external BTF, whose offsets the probes then read): only
// directories and files of root or of this process's user that nobody
// else may write, never through a symbolic link. Whoever can write there
// would decide what the daemon reads in the kernel.
package trusted

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// owner checks fi is root's or the euid's and writable by no one else.
func owner(path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner to check", path)
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, neither root nor this user: refusing it", path, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (mode %04o): refusing it", path, fi.Mode().Perm())
	}
	return nil
}

// Dir checks that path is a directory, not a link, of root or this user,
// that no one else may write. With parents, every directory above it up
// to / is checked too: one another user may write would let them rename
// what is below it away and put their own in its place. A sticky one
// (/tmp, 1777) would not: nobody renames an entry there that is not
// theirs, and the entry below is checked to be root's or this user's.
func Dir(path string, parents bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: refusing it", path)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", path)
	}
	if err := owner(path, fi); err != nil {
		return err
	}
	if !parents {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s (above %s) is a symbolic link: refusing it", d, path)
		}
		if err := owner(d, fi); err != nil && fi.Mode()&fs.ModeSticky == 0 {
			return fmt.Errorf("above %s: %w", path, err)
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// Open opens a regular file for reading, never through a link, and checks
// it as Dir checks a directory (on the open file: no race).
func Open(path string) (*os.File, fs.FileInfo, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if err == unix.ELOOP {
			return nil, nil, fmt.Errorf("%s is a symbolic link: refusing it", path)
		}
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file", path)
	}
	if err := owner(path, fi); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// CreateExcl creates path for writing, failing if anything (a file, a
// link) is already there.
func CreateExcl(path string, mode os.FileMode) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, mode)
}
