// Package outfile creates the files apmwatch writes (recordings, incident
// bundles, finding and action logs, reports): a file it creates gets mode
// 0640 and a directory 0750 whatever the umask, since findings and
// recordings name processes and hosts; and it never writes through a
// symbolic link, which a local user could have planted at a predictable
// path to make a root process overwrite a file of their choosing.
package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Modes of what apmwatch creates.
const (
	FileMode fs.FileMode = 0o640
	DirMode  fs.FileMode = 0o750
)

// ErrSymlink is returned for an output path that is a symbolic link.
var ErrSymlink = errors.New("is a symbolic link: refusing to write through it")

// Create opens path for writing with flag (os.O_TRUNC or os.O_APPEND, or
// 0), creating it with FileMode when missing. An existing file keeps its
// mode. The last element of path must not be a symbolic link.
func Create(path string, flag int) (*os.File, error) {
	const base = os.O_WRONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	f, err := os.OpenFile(path, base|os.O_CREATE|os.O_EXCL|flag, FileMode)
	if err == nil {
		// The umask may have taken bits away: the mode is the rule.
		if err := f.Chmod(FileMode); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	if errors.Is(err, fs.ErrExist) { // a file, or a symbolic link (O_EXCL does not follow it)
		f, err = os.OpenFile(path, base|flag, 0)
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s %w", path, ErrSymlink)
	}
	return f, err
}

// WriteFile writes data to path as Create(path, os.O_TRUNC) does.
func WriteFile(path string, data []byte) error {
	f, err := Create(path, os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// MkdirAll creates the directory path and its missing parents with
// DirMode. An existing directory keeps its mode; path must not be a
// symbolic link.
func MkdirAll(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s %w", path, ErrSymlink)
	case err == nil && !fi.IsDir():
		return fmt.Errorf("%s exists and is not a directory", path)
	case err == nil:
		return nil
	}
	if err := os.MkdirAll(path, DirMode); err != nil {
		return err
	}
	return os.Chmod(path, DirMode)
}

// OwnDir checks that path is a directory of this process's user that no
// one else may write to: a state directory that another local user made
// (or made writable) first, at a predictable path, would let them plant
// what the daemon then trusts as its own.
func OwnDir(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s %w", path, ErrSymlink)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory", path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner to check", path)
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by this user (uid %d): refusing it", path, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (mode %04o): refusing it", path, fi.Mode().Perm())
	}
	return nil
}
