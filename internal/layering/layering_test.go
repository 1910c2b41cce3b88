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
	"findingline/findinglinetest", "fleet/fleettest"}

// modes are the packages that each run one use of the product (trace and
// record, audit, the fleet, postmortem, the actuator): none imports
// another; what they share lives below them (findingline, output, ...).
var modes = []string{"session", "audit", "fleet", "postmortem", "actuator"}

// modeOf is the mode a package belongs to (a mode's packages are those
// under it: fleet/publish is the fleet's), or "".
func modeOf(p string) string {
	for _, m := range modes {
		if under(p, m) {
			return m
		}
	}
	return ""
}

// The fleet's packages, one a role (fleet/*/doc.go): data flows host ->
// NATS -> judge -> finding line.
const (
	fleetJudge   = "fleet"            // the judge: engine, shares, leases, status, history
	fleetWire    = "fleet/wire"       // the protocol both sides speak
	fleetClient  = "fleet/natsconn"   // the NATS client options and reads both sides use
	fleetServer  = "fleet/natsserver" // the embedded NATS server and its users
	fleetPublish = "fleet/publish"    // the host side: tracker, publisher, on-disk queue
)

// fleetRule is the rule of the fleet's roles that the import of imp (to,
// relative to the module, "" outside it) by from breaks, or "".
func fleetRule(from, to, imp string) string {
	natsClient := strings.HasPrefix(imp, "github.com/nats-io/")
	switch {
	case under(from, fleetWire) && natsClient:
		return "the fleet's protocol (fleet/wire) imports no NATS client"
	case under(from, fleetWire) && to != "" && under(to, fleetJudge) && !under(to, fleetWire):
		return "the fleet's protocol (fleet/wire) imports no other package of the fleet"
	case under(from, fleetPublish) && to == fleetJudge:
		return "the host side (fleet/publish) never imports the judge (fleet)"
	case under(from, fleetPublish) && to != "" && under(to, fleetServer):
		return "the host side (fleet/publish) runs no NATS server (fleet/natsserver)"
	case from == fleetJudge && to != "" && under(to, fleetPublish):
		return "the judge (fleet) never imports the host side's publisher and queue (fleet/publish)"
	case under(from, fleetClient) && (to == fleetJudge || to != "" && (under(to, fleetPublish) || under(to, fleetServer))):
		return "the NATS client (fleet/natsconn) imports neither side nor the server"
	case under(from, fleetClient) && strings.HasPrefix(imp, "github.com/nats-io/nats-server/"):
		return "the NATS client (fleet/natsconn) imports no NATS server"
	case under(from, fleetServer) && (to == fleetJudge || to != "" && under(to, fleetPublish)):
		return "the embedded server (fleet/natsserver) imports neither side"
	}
	return ""
}

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
	pkgs := list(t, module+"/...")
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages of %s: want the whole module", len(pkgs), module)
	}
	return pkgs
}

// list runs go list with every build tag; args are its flags and patterns.
func list(t *testing.T, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Error", "-tags", buildTags}, args...)...)
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
				case !test && modeOf(from) != "" && to != "" && modeOf(to) != "" && modeOf(from) != modeOf(to):
					bad(from, imp, "a mode imports no other mode")
				case !test && fleetRule(from, to, imp) != "":
					bad(from, imp, fleetRule(from, to, imp))
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
		{pkg{ImportPath: m("fleet/publish"), Imports: []string{m("audit")}}, "a mode imports no other mode"},
		{pkg{ImportPath: m("fleet/publish"), Imports: []string{m("fleet/wire"), m("fleet/natsconn"), m("findingline"), "github.com/nats-io/nats.go"}}, ""},
		{pkg{ImportPath: m("fleet/publish"), Imports: []string{m("fleet")}}, "the host side (fleet/publish) never imports the judge (fleet)"},
		{pkg{ImportPath: m("fleet/publish"), Imports: []string{m("fleet/natsserver")}}, "the host side (fleet/publish) runs no NATS server (fleet/natsserver)"},
		{pkg{ImportPath: m("fleet/publish"), TestImports: []string{m("fleet/natsserver"), m("fleet/fleettest")}}, ""},
		{pkg{ImportPath: m("fleet"), Imports: []string{m("fleet/wire"), m("fleet/natsconn"), m("fleet/natsserver")}}, ""},
		{pkg{ImportPath: m("fleet"), Imports: []string{m("fleet/publish")}}, "the judge (fleet) never imports the host side's publisher and queue (fleet/publish)"},
		{pkg{ImportPath: m("fleet"), TestImports: []string{m("fleet/publish")}}, ""},
		{pkg{ImportPath: m("fleet/wire"), Imports: []string{"github.com/nats-io/nats.go/jetstream"}}, "the fleet's protocol (fleet/wire) imports no NATS client"},
		{pkg{ImportPath: m("fleet/wire"), Imports: []string{m("fleet/natsconn")}}, "the fleet's protocol (fleet/wire) imports no other package of the fleet"},
		{pkg{ImportPath: m("fleet/natsconn"), Imports: []string{m("fleet/natsserver")}}, "the NATS client (fleet/natsconn) imports neither side nor the server"},
		{pkg{ImportPath: m("fleet/natsconn"), Imports: []string{m("fleet")}}, "the NATS client (fleet/natsconn) imports neither side nor the server"},
		{pkg{ImportPath: m("fleet/natsconn"), Imports: []string{"github.com/nats-io/nats-server/v2/server"}}, "the NATS client (fleet/natsconn) imports no NATS server"},
		{pkg{ImportPath: m("fleet/natsserver"), Imports: []string{m("fleet/publish")}}, "the embedded server (fleet/natsserver) imports neither side"},
		{pkg{ImportPath: m("fleet/natsserver"), Imports: []string{m("fleet/natsconn"), "github.com/nats-io/nats-server/v2/server"}}, ""},
		{pkg{ImportPath: m("fleet/publish"), Imports: []string{m("fleet/fleettest")}}, "a test kit is imported by tests only"},
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
