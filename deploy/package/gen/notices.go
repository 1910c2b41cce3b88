package main

import (
	"bytes"
	"debug/buildinfo"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// A module compiled into the binary, and where its files are.
type module struct {
	path, version, dir string
}

// The files of a module's top directory that NOTICES copies: LICENSE,
// LICENCE, COPYING, UNLICENSE (one is required), NOTICE, PATENTS, with any
// suffix (LICENSE.txt, LICENSE-APACHE).
var (
	noticeRE  = regexp.MustCompile(`(?i)^(licen[cs]e|copying|unlicense|notice|patents)([._-].*)?$`)
	licenceRE = regexp.MustCompile(`(?i)^(licen[cs]e|copying|unlicense)`)
)

func noticeFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	licence := false
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || !noticeRE.MatchString(n) || strings.HasSuffix(n, ".go") {
			continue
		}
		names = append(names, n)
		licence = licence || licenceRE.MatchString(n)
	}
	if !licence {
		return nil, fmt.Errorf("no licence file (LICENSE, COPYING, ...) in %s", dir)
	}
	return names, nil
}

const noticesIntro = `Notices of the software compiled into /usr/bin/apmwatch besides apmwatch's
own code (whose licence is in /usr/share/doc/apmwatch/copyright, or
/usr/share/licenses/apmwatch/LICENSE): the Go runtime and standard library,
and every Go module the binary holds, each followed by the licence and
notice files it ships, unchanged.
`

// notices renders NOTICES: the toolchain's files from goroot, then each
// module's.
func notices(goVersion, goroot string, mods []module) ([]byte, error) {
	all := append([]module{{path: "Go (runtime and standard library)", version: goVersion, dir: goroot}}, mods...)
	var b bytes.Buffer
	b.WriteString(noticesIntro + "\n")
	for _, m := range all {
		fmt.Fprintf(&b, "  %s %s\n", m.path, m.version)
	}
	rule := strings.Repeat("=", 78) + "\n"
	for _, m := range all {
		names, err := noticeFiles(m.dir)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %v", m.path, m.version, err)
		}
		for _, n := range names {
			text, err := os.ReadFile(filepath.Join(m.dir, n))
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "\n%s%s %s: %s\n%s", rule, m.path, m.version, n, rule)
			b.Write(bytes.TrimRight(text, "\n"))
			b.WriteString("\n")
		}
	}
	return b.Bytes(), nil
}

// escape is the module cache's spelling of a path or version: an upper-case
// letter is "!" and the letter in lower case.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// binaryModules lists the modules compiled into bin, located in modcache.
func binaryModules(bin, modcache string) (goVersion string, mods []module, err error) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "", nil, err
	}
	for _, d := range info.Deps {
		if d.Replace != nil {
			if d.Replace.Version == "" {
				return "", nil, fmt.Errorf("%s is replaced by a directory, %s: its licence cannot be looked up", d.Path, d.Replace.Path)
			}
			d = d.Replace
		}
		dir := filepath.Join(modcache, escape(d.Path)+"@"+escape(d.Version))
		if _, err := os.Stat(dir); err != nil {
			return "", nil, fmt.Errorf("%s %s is not in the module cache (go mod download): %v", d.Path, d.Version, err)
		}
		mods = append(mods, module{d.Path, d.Version, dir})
	}
	return info.GoVersion, mods, nil
}

// goEnv returns the module cache and the toolchain's directory.
func goEnv() ([]string, error) {
	env, err := exec.Command("go", "env", "GOMODCACHE", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %v", err)
	}
	dirs := strings.Split(strings.TrimSpace(string(env)), "\n")
	if len(dirs) != 2 {
		return nil, fmt.Errorf("go env GOMODCACHE GOROOT: %q", env)
	}
	return dirs, nil
}

func noticesCmd(args []string) error {
	fs := flag.NewFlagSet("notices", flag.ContinueOnError)
	out := fs.String("o", "", "write NOTICES here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *out == "" {
		return fmt.Errorf("usage: gen notices -o OUT BINARY")
	}
	dirs, err := goEnv()
	if err != nil {
		return err
	}
	goVersion, mods, err := binaryModules(fs.Arg(0), dirs[0])
	if err != nil {
		return err
	}
	b, err := notices(goVersion, dirs[1], mods)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, b, 0o644)
}
