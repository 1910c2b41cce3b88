package vm

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
)

// An Entry is one file, directory or symlink of a newc cpio archive.
// Exactly one of the kinds applies: Dir, Link (symlink target) or a regular
// file whose content is Data.
type Entry struct {
	Name  string // path inside the archive, without a leading slash
	Mode  fs.FileMode
	Dir   bool
	Link  string
	Data  []byte
	MTime int64 // seconds; 0 in the reproducible base image
}

// An Archive collects entries and writes them as a newc cpio archive (the
// initramfs format): parent directories are added automatically, entries are
// written sorted by name so the output is reproducible.
type Archive struct {
	entries map[string]Entry
}

// NewArchive returns an empty archive.
func NewArchive() *Archive { return &Archive{entries: map[string]Entry{}} }

func clean(name string) string { return strings.Trim(name, "/") }

// Dir adds a directory (and its parents).
func (a *Archive) Dir(name string) {
	name = clean(name)
	if name == "" || name == "." {
		return
	}
	if _, ok := a.entries[name]; ok {
		return
	}
	if i := strings.LastIndexByte(name, '/'); i > 0 {
		a.Dir(name[:i])
	}
	a.entries[name] = Entry{Name: name, Mode: 0o755, Dir: true}
}

// File adds a regular file; a later File or Symlink with the same name wins.
func (a *Archive) File(name string, mode fs.FileMode, data []byte) {
	a.FileTime(name, mode, data, 0)
}

// FileTime adds a regular file with a modification time.
func (a *Archive) FileTime(name string, mode fs.FileMode, data []byte, mtime int64) {
	name = clean(name)
	a.parent(name)
	a.entries[name] = Entry{Name: name, Mode: mode.Perm(), Data: data, MTime: mtime}
}

// Symlink adds a symbolic link name -> target.
func (a *Archive) Symlink(name, target string) {
	name = clean(name)
	a.parent(name)
	a.entries[name] = Entry{Name: name, Mode: 0o777, Link: target}
}

// Has reports whether name was added.
func (a *Archive) Has(name string) bool {
	_, ok := a.entries[clean(name)]
	return ok
}

func (a *Archive) parent(name string) {
	if i := strings.LastIndexByte(name, '/'); i > 0 {
		a.Dir(name[:i])
	}
}

// WriteTo writes the archive with its trailer.
func (a *Archive) WriteTo(w io.Writer) (int64, error) {
	names := make([]string, 0, len(a.entries))
	for n := range a.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	cw := &countWriter{w: bufio.NewWriterSize(w, 1<<20)}
	for i, n := range names {
		e := a.entries[n]
		mode, data := uint32(0o100000), e.Data
		switch {
		case e.Dir:
			mode = 0o040000
		case e.Link != "":
			mode, data = 0o120000, []byte(e.Link)
		}
		writeEntry(cw, uint32(i+1), mode|uint32(e.Mode.Perm()), 1+boolInt(e.Dir), e.MTime, e.Name, data)
	}
	writeEntry(cw, 0, 0, 1, 0, "TRAILER!!!", nil)
	if cw.err == nil {
		cw.err = cw.w.(*bufio.Writer).Flush()
	}
	return cw.n, cw.err
}

func boolInt(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// writeEntry writes one newc header, the name and the data, each padded to 4 bytes.
func writeEntry(w *countWriter, ino, mode, nlink uint32, mtime int64, name string, data []byte) {
	// magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor,
	// rdevmajor, rdevminor, namesize, check
	fmt.Fprintf(w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, uint32(mtime), len(data), 0, 0, 0, 0, len(name)+1, 0)
	io.WriteString(w, name)
	w.Write([]byte{0})
	w.pad()
	w.Write(data)
	w.pad()
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func (c *countWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.Write(make([]byte, 4-r))
	}
}
