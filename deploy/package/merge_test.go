package package_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A unit's settings after systemd applies its unit file and drop-ins in
// order, for the settings these tests read.
type merged struct {
	files     []string          // the files applied, in order, relative to the root
	execStart []string          // the ExecStart= lines left after resets
	env       map[string]string // Environment=
	envFiles  []string          // EnvironmentFile=, "-" dropped
	optional  map[string]bool   // EnvironmentFile= given with "-"
	lists     map[string][]string
}

// Settings whose lines add to the list, an empty value emptying it.
var additive = []string{"AmbientCapabilities", "CapabilityBoundingSet", "IPAddressAllow", "IPAddressDeny", "SystemCallFilter"}

// mergeCatConfig merges what `systemd-analyze cat-config --root=ROOT` prints
// for a unit: each file's lines under a "# ROOT/path" line, in the order
// systemd applies the files.
func mergeCatConfig(out, root string) (merged, error) {
	m := merged{env: map[string]string{}, optional: map[string]bool{}, lists: map[string][]string{}}
	section, cont := "", ""
	for _, l := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(l, "# "+root+"/"); ok && cont == "" {
			m.files, section = append(m.files, "/"+p), ""
			continue
		}
		l = strings.TrimSpace(l)
		if cont == "" && (l == "" || l[0] == '#' || l[0] == ';') {
			continue
		}
		if s, ok := strings.CutSuffix(l, `\`); ok {
			cont += s + " "
			continue
		}
		l, cont = cont+l, ""
		if strings.HasPrefix(l, "[") {
			section = l
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return m, fmt.Errorf("not a setting: %q", l)
		}
		if section != "[Service]" {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case k == "ExecStart" && v == "":
			m.execStart = nil
		case k == "ExecStart":
			m.execStart = append(m.execStart, v)
		case k == "Environment" && v == "":
			m.env = map[string]string{}
		case k == "Environment":
			for _, w := range words(v) {
				name, val, _ := strings.Cut(w, "=")
				m.env[name] = val
			}
		case k == "EnvironmentFile":
			f, opt := strings.CutPrefix(v, "-")
			m.envFiles, m.optional[f] = append(m.envFiles, f), opt
		case slices.Contains(additive, k) && v == "":
			m.lists[k] = nil
		case slices.Contains(additive, k):
			m.lists[k] = append(m.lists[k], strings.Fields(v)...)
		}
	}
	return m, nil
}

// words splits a value at white space outside quotes, unquoting.
func words(s string) []string {
	var ws []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				ws, in = append(ws, w.String()), false
				w.Reset()
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		ws = append(ws, w.String())
	}
	return ws
}

// environ is the environment ExecStart sees: Environment=, then each
// EnvironmentFile= read from root, later values winning.
func (m merged) environ(root string) (map[string]string, error) {
	env := map[string]string{}
	for k, v := range m.env {
		env[k] = v
	}
	for _, f := range m.envFiles {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			if m.optional[f] && os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		for _, l := range strings.Split(string(b), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || l[0] == '#' || l[0] == ';' {
				continue
			}
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				return nil, fmt.Errorf("%s: not an assignment: %q", f, l)
			}
			if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
				v = v[1 : len(v)-1]
			}
			env[strings.TrimSpace(k)] = v
		}
	}
	return env, nil
}

var (
	wholeVar  = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_]*)$`)
	bracedVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// argv is the command line of the one ExecStart=: a $VAR word is split at
// white space (nothing when empty), ${VAR} is replaced in place.
func (m merged) argv(root string) ([]string, error) {
	if len(m.execStart) != 1 {
		return nil, fmt.Errorf("%d ExecStart= lines after the resets, want 1: %q", len(m.execStart), m.execStart)
	}
	env, err := m.environ(root)
	if err != nil {
		return nil, err
	}
	var argv []string
	for _, w := range words(m.execStart[0]) {
		if v := wholeVar.FindStringSubmatch(w); v != nil {
			argv = append(argv, strings.Fields(env[v[1]])...)
			continue
		}
		argv = append(argv, bracedVar.ReplaceAllStringFunc(w, func(s string) string { return env[s[2:len(s)-1]] }))
	}
	return argv, nil
}

// The merger itself, on a unit, a drop-in resetting ExecStart and one
// adding to it, and an environment file overriding Environment=.
func TestMergeCatConfig(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc/default"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/default/x"), []byte("# flags\nX_ARGS=\"--a 1  --b\"\nY=from-file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := "# " + root + "/usr/lib/systemd/system/x.service\n[Unit]\nDescription=x\n[Service]\n" +
		"ExecStart=/usr/local/bin/x \\\n\t--old\nEnvironment=E= Y=unit\nIPAddressAllow=localhost\nAmbientCapabilities=CAP_BPF\n\n" +
		"# " + root + "/usr/lib/systemd/system/x.service.d/10-package.conf\n[Service]\nEnvironmentFile=-/etc/default/x\n" +
		"EnvironmentFile=-/etc/default/missing\nExecStart=\nExecStart=/usr/bin/x run $X_ARGS $E \"${Y}-z\"\n\n" +
		"# " + root + "/etc/systemd/system/x.service.d/enforce.conf\n[Service]\nEnvironment=\"E=--enforce --policy p\"\n" +
		"AmbientCapabilities=CAP_SYS_PTRACE\nIPAddressAllow=\nIPAddressAllow=192.0.2.0/24 ::1\n"
	m, err := mergeCatConfig(out, root)
	if err != nil {
		t.Fatal(err)
	}
	argv, err := m.argv(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/usr/bin/x", "run", "--a", "1", "--b", "--enforce", "--policy", "p", "from-file-z"}
	if !slices.Equal(argv, want) {
		t.Errorf("argv %q, want %q", argv, want)
	}
	if !slices.Equal(m.lists["AmbientCapabilities"], []string{"CAP_BPF", "CAP_SYS_PTRACE"}) ||
		!slices.Equal(m.lists["IPAddressAllow"], []string{"192.0.2.0/24", "::1"}) ||
		!slices.Equal(m.files, []string{"/usr/lib/systemd/system/x.service", "/usr/lib/systemd/system/x.service.d/10-package.conf",
			"/etc/systemd/system/x.service.d/enforce.conf"}) {
		t.Errorf("merged: %+v", m)
	}
	// Without the reset, two ExecStart= lines: a simple service refuses that.
	m, _ = mergeCatConfig(strings.Replace(out, "ExecStart=\n", "", 1), root)
	if _, err := m.argv(root); err == nil {
		t.Error("two ExecStart= lines were accepted")
	}
	// A required environment file that is missing is an error.
	m, _ = mergeCatConfig(strings.Replace(out, "-/etc/default/missing", "/etc/default/missing", 1), root)
	if _, err := m.argv(root); err == nil {
		t.Error("a missing required EnvironmentFile was accepted")
	}
}
