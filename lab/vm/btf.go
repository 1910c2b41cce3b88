package vm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// A kernel whose modules carry no BTF (5.10) gets the external BTF a
// prepared host has: apmwatch btf gen, run once in a guest of that kernel
// with the modules' debug files (setup's dbg/) at /extra, writes
// MODULE.btf for the loaded modules apmwatch hooks and for mlx5_core (whose
// struct mlx5_core_qp the lab's raw driver hook reads). The files are kept
// in AssetDir/btf/ and go into the image at apmwatch's default directory,
// /var/lib/apmwatch/btf/<version>/, so a plain apmwatch in the guest finds
// them. They are made again when the kernel, its debug files or pahole change.

// btfGuestDir is apmwatch's default external BTF directory for kernel k.
func btfGuestDir(k Kernel) string { return "var/lib/apmwatch/btf/" + k.Version }

func btfCacheDir(p Paths, k Kernel) string { return filepath.Join(p.AssetDir(k.Name), "btf") }

// btfGenCmd runs in the guest: the default run (loaded hook modules) and
// mlx5_core by name, then every file as base64 between markers.
const btfGenCmd = `set -e
apmwatch btf gen --debug-dir /extra
apmwatch btf gen --debug-dir /extra --module mlx5_core
cd /var/lib/apmwatch/btf/$(uname -r)
for f in *.btf *.btf.id; do echo "@btf $f"; base64 "$f"; echo "@end"; done`

const btfFormat = "btf+id"

// btfKey is what the files depend on: the kernel, its debug files and pahole.
func btfKey(k Kernel) (string, error) {
	h := sha256.New()
	// btfFormat: the files' set (MODULE.btf and, beside each, the
	// identity of the module build it describes: MODULE.btf.id).
	fmt.Fprintf(h, "%s\x00%s\x00", k.Version, btfFormat)
	files, err := filepath.Glob(filepath.Join(k.DebugDir(), "*.ko"))
	if err != nil {
		return "", err
	}
	pahole, err := findHost("pahole", "/usr/bin", "/usr/sbin")
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	for _, f := range append(files, pahole) {
		st, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", filepath.Base(f), st.Size(), st.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// btfCurrent says the kept files match the kernel's debug files.
func btfCurrent(p Paths, k Kernel) bool {
	key, err := btfKey(k)
	if err != nil {
		return false
	}
	old, err := os.ReadFile(filepath.Join(btfCacheDir(p, k), "key"))
	return err == nil && strings.TrimSpace(string(old)) == key
}

// addBTF adds the kept files to the image, and pahole (what btf gen needs).
func addBTF(im *image, p Paths, k Kernel) error {
	if !k.NeedsBTF() {
		return nil
	}
	pahole, err := findHost("pahole", "/usr/bin", "/usr/sbin")
	if err != nil {
		return err
	}
	im.program("usr/bin/pahole", pahole)
	if !btfCurrent(p, k) {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(btfCacheDir(p, k), "*.btf"))
	ids, _ := filepath.Glob(filepath.Join(btfCacheDir(p, k), "*.btf.id"))
	for _, f := range append(files, ids...) {
		im.hostFile(btfGuestDir(k)+"/"+filepath.Base(f), f)
	}
	return nil
}

// PrepareBTF makes the kept files when they are missing or stale: it boots
// the image built without them and runs apmwatch btf gen there. It reports
// whether it ran; the image must then be built again.
func PrepareBTF(ctx context.Context, p Paths, k Kernel, stderr io.Writer) (bool, error) {
	if !k.NeedsBTF() || btfCurrent(p, k) {
		return false, nil
	}
	if !exists(filepath.Join(p.Repo, "bin", "apmwatch")) {
		return false, fmt.Errorf("kernel %s needs its modules' BTF from apmwatch btf gen, and bin/apmwatch is not built (make build)", k.Name)
	}
	key, err := btfKey(k)
	if err != nil {
		return false, err
	}
	var out bytes.Buffer
	start := time.Now()
	fmt.Fprintf(stderr, "labvm: %s modules carry no BTF: running apmwatch btf gen in a %s guest on %s\n", k.Name, k.Name, k.DebugDir())
	status, err := Run(ctx, RunConfig{
		Paths: p, Kernel: k.Name, Cmd: btfGenCmd, Extra: k.DebugDir(),
		Timeout: 15 * time.Minute, BootTimeout: 180 * time.Second,
		Stdout: &out, Stderr: io.Discard,
	})
	if err != nil {
		return false, fmt.Errorf("apmwatch btf gen in the %s guest: %w", k.Name, err)
	}
	files, report, perr := parseBTFOutput(out.String())
	for _, l := range report {
		fmt.Fprintf(stderr, "labvm: btf gen: %s\n", l)
	}
	if status != 0 || perr != nil || len(files) == 0 {
		if perr == nil {
			perr = fmt.Errorf("exit status %d, %d files", status, len(files))
		}
		return false, fmt.Errorf("apmwatch btf gen in the %s guest failed: %w", k.Name, perr)
	}
	dir := btfCacheDir(p, k)
	tmp := dir + ".new"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return false, err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return false, err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "key"), []byte(key+"\n"), 0o644); err != nil {
		return false, err
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return false, err
	}
	fmt.Fprintf(stderr, "labvm: %d BTF files for %s in %s (%.0fs)\n", len(files), k.Version, dir, time.Since(start).Seconds())
	return true, nil
}

// parseBTFOutput splits btfGenCmd's output into the files and the other
// lines (btf gen's report).
func parseBTFOutput(s string) (map[string][]byte, []string, error) {
	files := map[string][]byte{}
	var report []string
	var name string
	var b64 strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		l := strings.TrimRight(sc.Text(), "\r")
		switch {
		case name == "" && strings.HasPrefix(l, "@btf "):
			name = strings.TrimPrefix(l, "@btf ")
			if name != filepath.Base(name) || !strings.HasSuffix(name, ".btf") && !strings.HasSuffix(name, ".btf.id") {
				return nil, nil, fmt.Errorf("bad file name %q", name)
			}
			b64.Reset()
		case name != "" && l == "@end":
			data, err := base64.StdEncoding.DecodeString(b64.String())
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", name, err)
			}
			files[name] = data
			name = ""
		case name != "":
			b64.WriteString(strings.TrimSpace(l))
		default:
			report = append(report, l)
		}
	}
	if name != "" {
		return nil, nil, fmt.Errorf("%s: output ends inside the file", name)
	}
	return files, report, sc.Err()
}
