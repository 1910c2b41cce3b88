package vm

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// ParseLdd returns the absolute library paths in ldd's output (the dynamic
// loader included). A statically linked program yields none; a library
// that ldd cannot find is an error.
func ParseLdd(out []byte) ([]string, error) {
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		t := strings.TrimSpace(sc.Text())
		switch {
		case t == "", strings.Contains(t, "not a dynamic executable"), strings.Contains(t, "statically linked"):
			continue
		case strings.Contains(t, "=> not found"):
			return nil, fmt.Errorf("library %s not found", strings.Fields(t)[0])
		}
		p := t
		if _, after, ok := strings.Cut(t, "=>"); ok {
			p = strings.TrimSpace(after)
		}
		if i := strings.Index(p, " ("); i >= 0 {
			p = p[:i]
		}
		if strings.HasPrefix(p, "/") {
			libs = append(libs, p)
		}
	}
	return libs, sc.Err()
}

// SharedLibs runs ldd on an ELF program or library and returns its libraries.
func SharedLibs(file string) ([]string, error) {
	out, err := exec.Command("ldd", file).CombinedOutput()
	if err != nil && !bytes.Contains(out, []byte("not a dynamic executable")) {
		return nil, fmt.Errorf("ldd %s: %w: %s", file, err, bytes.TrimSpace(out))
	}
	libs, err := ParseLdd(out)
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", file, err)
	}
	return libs, nil
}

// IsELF reports whether file starts with the ELF magic.
func IsELF(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	var m [4]byte
	n, _ := f.Read(m[:])
	return n == 4 && string(m[:]) == "\x7fELF"
}

// GuestPath maps a host path to the guest's merged-/usr layout, where /bin,
// /sbin, /lib and /lib64 are symlinks into /usr: /lib/x/y -> usr/lib/x/y.
func GuestPath(p string) string {
	p = strings.TrimPrefix(p, "/")
	for _, d := range []string{"bin/", "sbin/", "lib/", "lib64/"} {
		if strings.HasPrefix(p, d) {
			return "usr/" + p
		}
	}
	return p
}
