package vm

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// AddTree adds the files, directories and symlinks under the host directory
// dir to the archive below prefix, keeping permission bits.
func AddTree(a *Archive, prefix, dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	a.Dir(prefix)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		name := path.Join(prefix, filepath.ToSlash(rel))
		switch t := d.Type(); {
		case t.IsDir():
			a.Dir(name)
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			a.Symlink(name, target)
		case t.IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			a.FileTime(name, info.Mode(), data, info.ModTime().Unix())
		default:
			return fmt.Errorf("%s: unsupported file type %s", p, t)
		}
		return nil
	})
}
