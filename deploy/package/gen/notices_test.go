package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestNotices(t *testing.T) {
	goroot := writeFiles(t, t.TempDir(), map[string]string{"LICENSE": "go licence\n", "PATENTS": "go patents\n", "README.md": "no"})
	a := writeFiles(t, t.TempDir(), map[string]string{"LICENSE-APACHE": "apache text\n", "NOTICE": "a notice\n",
		"license.go": "package a", "licenses/LICENSE": "nested, not read"})
	b := writeFiles(t, t.TempDir(), map[string]string{"COPYING.txt": "mit text\n"})
	out, err := notices("go1.26.8", goroot, []module{{"example.com/a", "v1.0.0", a}, {"example.com/b", "v0.1.0", b}})
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"  example.com/a v1.0.0\n  example.com/b v0.1.0\n",
		"go1.26.8: LICENSE\n", "go licence", "go1.26.8: PATENTS\n", "example.com/a v1.0.0: LICENSE-APACHE\n" + strings.Repeat("=", 78) + "\napache text\n",
		"example.com/a v1.0.0: NOTICE\n", "a notice", "example.com/b v0.1.0: COPYING.txt\n", "mit text"} {
		if !strings.Contains(s, want) {
			t.Errorf("NOTICES lacks %q:\n%s", want, s)
		}
	}
	for _, bad := range []string{"package a", "nested", "README"} {
		if strings.Contains(s, bad) {
			t.Errorf("NOTICES holds %q:\n%s", bad, s)
		}
	}
	// A module without a licence file (a NOTICE alone is not one) is an error naming it.
	c := writeFiles(t, t.TempDir(), map[string]string{"NOTICE": "x", "README": "y"})
	if _, err := notices("go1.26.8", goroot, []module{{"example.com/c", "v1.0.0", c}}); err == nil ||
		!strings.Contains(err.Error(), "example.com/c v1.0.0: no licence file") {
		t.Errorf("module without a licence: %v", err)
	}
}

func TestEscape(t *testing.T) {
	if got := escape("github.com/BurntSushi/toml@v1.0.0-RC1"); got != "github.com/!burnt!sushi/toml@v1.0.0-!r!c1" {
		t.Errorf("escape: %q", got)
	}
}

// The test binary's own modules are found in the module cache.
func TestBinaryModules(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := goEnv()
	if err != nil {
		t.Fatal(err)
	}
	v, mods, err := binaryModules(self, out[0])
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range mods {
		found = found || m.path == "go.yaml.in/yaml/v3"
		if _, err := noticeFiles(m.dir); err != nil {
			t.Error(err)
		}
	}
	if !strings.HasPrefix(v, "go1.") || !found {
		t.Errorf("binaryModules: %s %+v, want go.yaml.in/yaml/v3 among them", v, mods)
	}
	if _, _, err := binaryModules(self, t.TempDir()); err == nil || !strings.Contains(err.Error(), "not in the module cache") {
		t.Errorf("empty module cache: %v", err)
	}
}
