package btfgen

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Bounds: the search walks trees a package manager wrote, but reads them
// as root.
const (
	maxWalk       = 500_000 // directory entries visited in all
	maxModuleSize = 1 << 30 // a module file, decompressed (debug builds of mlx5_core are large)
	decompressFor = time.Minute
)

// moduleName is the module a file holds: ib_core.ko, ib-core.ko.xz and
// ib_core.ko.debug all hold ib_core. ok false: not a module file.
func moduleName(file string) (string, bool) {
	n := strings.TrimSuffix(file, ".debug")
	for _, z := range []string{".gz", ".xz", ".zst"} {
		n = strings.TrimSuffix(n, z)
	}
	if !strings.HasSuffix(n, ".ko") || n == ".ko" {
		return "", false
	}
	return strings.ReplaceAll(strings.TrimSuffix(n, ".ko"), "-", "_"), true
}

// index maps the modules wanted to their files under dirs, in the order of
// dirs. Missing dirs are skipped; the walk is bounded.
func index(dirs []string, want map[string]bool) (map[string][]string, error) {
	out := map[string][]string{}
	seen := 0
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if p == d && errors.Is(err, fs.ErrNotExist) {
					return filepath.SkipDir
				}
				return nil // an unreadable corner: skip it
			}
			if seen++; seen > maxWalk {
				return fmt.Errorf("more than %d entries under %s", maxWalk, strings.Join(dirs, ", "))
			}
			if e.Type().IsRegular() {
				if m, ok := moduleName(e.Name()); ok && want[m] {
					out[m] = append(out[m], p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("searching for modules: %w", err)
		}
	}
	return out, nil
}

// readModule reads a module file whole, decompressed: gzip in process, xz
// and zstd with the tools of those names.
func readModule(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	switch {
	case strings.HasSuffix(path, ".gz"):
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		r = zr
	case strings.HasSuffix(path, ".xz"):
		return decompress(path, "xz")
	case strings.HasSuffix(path, ".zst"):
		return decompress(path, "zstd")
	}
	b, err := io.ReadAll(io.LimitReader(r, maxModuleSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxModuleSize {
		return nil, fmt.Errorf("%s: larger than %d MiB", path, maxModuleSize>>20)
	}
	return b, nil
}

func decompress(path, tool string) ([]byte, error) {
	bin, err := exec.LookPath(tool)
	if err != nil {
		return nil, fmt.Errorf("%s is %s-compressed and %s is not installed", path, tool, tool)
	}
	ctx, cancel := context.WithTimeout(context.Background(), decompressFor)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-dc", path)
	var out limitedBuffer
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if out.over {
			return nil, fmt.Errorf("%s: larger than %d MiB", path, maxModuleSize>>20)
		}
		return nil, fmt.Errorf("%s -dc %s: %w: %s", tool, path, err, firstLine(errb.String()))
	}
	return out.Bytes(), nil
}

// limitedBuffer stops a decompressor past maxModuleSize.
type limitedBuffer struct {
	bytes.Buffer
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxModuleSize {
		b.over = true
		return 0, errors.New("too large")
	}
	return b.Buffer.Write(p)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
