package vm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// A source is one file of the image: a host file (xz: decompress it), literal
// data, or a symlink.
type source struct {
	guest string
	host  string
	xz    bool
	data  []byte
	link  string
	mode  fs.FileMode
}

// An image lists the files of an initramfs before it is written.
type image struct {
	files map[string]source
	err   error
}

func (im *image) add(s source) {
	s.guest = GuestPath(strings.Trim(s.guest, "/"))
	im.files[s.guest] = s
}

// hostFile adds a host file under its guest path, keeping its mode.
func (im *image) hostFile(guest, host string) {
	st, err := os.Stat(host)
	if err != nil {
		im.fail(fmt.Errorf("adding %s: %w", host, err))
		return
	}
	im.add(source{guest: guest, host: host, mode: st.Mode().Perm()})
}

// program adds an ELF program (or library) and every library ldd names.
func (im *image) program(guest, host string) {
	im.hostFile(guest, host)
	libs, err := SharedLibs(host)
	if err != nil {
		im.fail(err)
		return
	}
	for _, l := range libs {
		if _, ok := im.files[GuestPath(l)]; ok {
			continue
		}
		real, err := filepath.EvalSymlinks(l)
		if err != nil {
			im.fail(fmt.Errorf("resolving %s: %w", l, err))
			continue
		}
		im.hostFile(GuestPath(l), real)
	}
}

func (im *image) fail(err error) {
	if im.err == nil {
		im.err = err
	}
}

// hash is a digest of every file's guest path, mode and content.
func (im *image) hash() (string, error) {
	h := sha256.New()
	for _, name := range im.names() {
		s := im.files[name]
		fmt.Fprintf(h, "%s\x00%o\x00%s\x00%t\x00%d\x00", name, s.mode, s.link, s.xz, len(s.data))
		h.Write(s.data)
		if s.host != "" {
			f, err := os.Open(s.host)
			if err != nil {
				return "", fmt.Errorf("hashing %s: %w", s.host, err)
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return "", fmt.Errorf("hashing %s: %w", s.host, err)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (im *image) names() []string {
	names := make([]string, 0, len(im.files))
	for n := range im.files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// archive reads every file and returns the cpio archive.
func (im *image) archive() (*Archive, error) {
	a := NewArchive()
	for _, d := range []string{"dev", "proc", "sys", "tmp", "run", "root", "mnt", "extra", "usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "etc"} {
		a.Dir(d)
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib64"} {
		a.Symlink(l, "usr/"+l)
	}
	for _, name := range im.names() {
		s := im.files[name]
		switch {
		case s.link != "":
			a.Symlink(name, s.link)
		case s.host == "":
			a.File(name, s.mode, s.data)
		case s.xz:
			out, err := exec.Command("xz", "-dc", s.host).Output()
			if err != nil {
				return nil, fmt.Errorf("decompressing %s: %w", s.host, err)
			}
			a.File(name, s.mode, out)
		default:
			data, err := os.ReadFile(s.host)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", s.host, err)
			}
			a.File(name, s.mode, data)
		}
	}
	return a, nil
}

// writeAtomic writes a file through a temporary file and a rename, so a
// concurrent reader never sees half of it.
func writeAtomic(name string, write func(io.Writer) (int64, error)) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
