package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/apmwatch/apmwatch"

// buildTags are every build tag a file of the module carries.
const buildTags = "labguest,gendocs"

// testKits may be imported by tests and by each other only.
var testKits = []string{"apm/apmtest", "recording/recordingtest", "internal/testkit", "deploy/promcheck",
	"findingline/findinglinetest"}

// modes are the packages that each run one use of the product (trace and
// record, audit, the fleet, postmortem, the actuator): none imports
// another; what they share lives below them (findingline, output, ...).
var modes = []string{"session", "audit", "fleet", "postmortem", "actuator"}

// pkg is what the rules read of one package of `go list -json`.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// rel is a module path relative to the module ("apm", "cmd/apmwatch"),
// or "" for a path outside it.
func rel(path string) string {
	if path == module {
		return "."
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return ""
}

// standard tells a standard library path: its first element has no dot.
func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// listModule runs go list over the module with every build tag.
func listModule(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Error", "-tags", buildTags, module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages of %s: want the whole module", len(pkgs), module)
	}
	return pkgs
}

// violations applies the rules to the packages; each violation is one
// line naming the importer, the import and the rule.
func violations(pkgs []pkg) []string {
	var out []string
	bad := func(from, imp, rule string) { out = append(out, fmt.Sprintf("%s imports %s: %s", from, imp, rule)) }
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		if from == "" {
			continue
		}
		kit := slices.Contains(testKits, from)
		check := func(imports []string, test bool) {
			for _, imp := range imports {
				to := rel(imp)
				switch {
				case from == "event" && !test && to != "":
					bad(from, imp, "event imports nothing of the module")
				case from == "event" && !test && !standard(imp):
					bad(from, imp, "event imports only the standard library")
				case from == "apm" && !test && to != "" && to != "event":
					bad(from, imp, "the model imports only event of the module")
				case from == "apm" && !test && to == "" && !standard(imp) && !strings.HasPrefix(imp, "golang.org/x/sys/"):
					bad(from, imp, "the model imports only the standard library and golang.org/x/sys")
				case to != "" && under(to, "cmd"):
					bad(from, imp, "cmd/ only wires: nothing imports it")
				case to != "" && under(to, "lab") && !under(from, "lab"):
					bad(from, imp, "only the lab imports lab/")
				case to != "" && slices.Contains(testKits, to) && !test && !kit:
					bad(from, imp, "a test kit is imported by tests only")
				case !test && slices.Contains(modes, from) && slices.Contains(modes, to) && from != to:
					bad(from, imp, "a mode imports no other mode")
				}
			}
		}
		check(p.Imports, false)
		check(p.TestImports, true)
		check(p.XTestImports, true)
	}
	return out
}

// TestImportRules checks the module against the rules of doc.go.
func TestImportRules(t *testing.T) {
	pkgs := listModule(t)
	for _, p := range pkgs {
		if p.Error != nil {
			t.Logf("%s: %s (its imports may be partial)", p.ImportPath, p.Error.Err)
		}
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// Each rule fires on an import that breaks it, and only on that one.
func TestRulesCatchViolations(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	cases := []struct {
		p    pkg
		want string // "" for no violation
	}{
		{pkg{ImportPath: m("event"), Imports: []string{"fmt", m("internal/escape")}}, "event imports nothing of the module"},
		{pkg{ImportPath: m("event"), Imports: []string{"golang.org/x/sys/unix"}}, "event imports only the standard library"},
		{pkg{ImportPath: m("event"), TestImports: []string{m("apm")}}, ""},
		{pkg{ImportPath: m("apm"), Imports: []string{m("event"), "golang.org/x/sys/unix", "sort"}}, ""},
		{pkg{ImportPath: m("apm"), Imports: []string{m("output")}}, "the model imports only event of the module"},
		{pkg{ImportPath: m("apm"), Imports: []string{"github.com/cilium/ebpf"}}, "the model imports only the standard library and golang.org/x/sys"},
		{pkg{ImportPath: m("apm"), XTestImports: []string{m("apm/apmtest"), m("recording")}}, ""},
		{pkg{ImportPath: m("audit"), Imports: []string{m("cmd/apmwatch")}}, "cmd/ only wires: nothing imports it"},
		{pkg{ImportPath: m("session"), TestImports: []string{m("lab/vm")}}, "only the lab imports lab/"},
		{pkg{ImportPath: m("lab/vm/cmd/labvm"), Imports: []string{m("lab/vm")}}, ""},
		{pkg{ImportPath: m("postmortem"), Imports: []string{m("recording/recordingtest")}}, "a test kit is imported by tests only"},
		{pkg{ImportPath: m("postmortem"), TestImports: []string{m("recording/recordingtest")}}, ""},
		{pkg{ImportPath: m("internal/testkit"), Imports: []string{m("apm"), m("recording")}}, ""},
		{pkg{ImportPath: m("fleet"), Imports: []string{m("audit")}}, "a mode imports no other mode"},
		{pkg{ImportPath: m("fleet"), Imports: []string{m("findingline")}}, ""},
		{pkg{ImportPath: m("fleet"), TestImports: []string{m("audit")}}, ""},
		{pkg{ImportPath: "example.com/other", Imports: []string{m("cmd/apmwatch")}}, ""},
	}
	for _, c := range cases {
		got := violations([]pkg{c.p})
		switch {
		case c.want == "" && len(got) != 0:
			t.Errorf("%+v: %v, want no violation", c.p, got)
		case c.want != "" && (len(got) != 1 || !strings.HasSuffix(got[0], ": "+c.want)):
			t.Errorf("%+v: %v, want one: %s", c.p, got, c.want)
		}
	}
}
