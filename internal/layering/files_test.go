package layering

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goFileName is a file name of the package's own directory in a comment.
var goFileName = regexp.MustCompile(`(?:^|[^\w/.])(\w+\.go)\b`)

// A package's doc.go that names its files names every one of them, and
// only files it has: a file added, renamed or removed shows up here.
func TestDocFileLists(t *testing.T) {
	checked := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != "../.." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "build" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "doc.go" {
			return nil
		}
		doc, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		named := map[string]bool{}
		for _, m := range goFileName.FindAllStringSubmatch(string(doc), -1) {
			named[m[1]] = true
		}
		if len(named) == 0 {
			return nil // no file list
		}
		checked++
		t.Logf("%s names %d files", path, len(named))
		dir := filepath.Dir(path)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		var have []string
		for _, e := range entries {
			have = append(have, e.Name())
			n := e.Name()
			if strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") && n != "doc.go" && !named[n] {
				t.Errorf("%s does not name %s", path, n)
			}
		}
		for n := range named {
			if !slices.Contains(have, n) {
				t.Errorf("%s names %s, which %s does not have", path, n, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 3 {
		t.Fatalf("%d doc.go file lists found: want the packages' (actuator, apm, audit, ...)", checked)
	}
}
