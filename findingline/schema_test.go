package findingline_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/findingline/findinglinetest"
)

// The schema's kinds are exactly the registry's: a new kind cannot ship
// without its place in the schema.
func TestSchemaKindsAreTheRegistry(t *testing.T) {
	var doc struct {
		Defs struct {
			Kind struct {
				Enum []string `json:"enum"`
			} `json:"kind"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(findingline.JSONSchema, &doc); err != nil {
		t.Fatal(err)
	}
	var reg []string
	for _, k := range apm.Kinds() {
		reg = append(reg, string(k))
	}
	slices.Sort(reg)
	got := slices.Sorted(slices.Values(doc.Defs.Kind.Enum))
	if !slices.Equal(got, reg) {
		t.Errorf("schema kinds %v\nregistry     %v", got, reg)
	}
}

// The checker refuses what the schema forbids: it is no rubber stamp.
func TestSchemaRefuses(t *testing.T) {
	f := apm.Finding{ID: 1, Kind: apm.MissedRearm, Severity: apm.SevError, QP: apm.Key{Device: "ibsim0", QPN: 5}, JudgedAt: 7}
	good, err := json.Marshal(findingline.New(f, "h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := findinglinetest.Check(good); err != nil {
		t.Fatalf("a line New made: %v\n%s", err, good)
	}
	r := f
	r.Resolved, r.Resolves = true, 1
	res, _ := json.Marshal(findingline.New(r, "h"))
	if err := findinglinetest.Check(res); err != nil {
		t.Fatalf("a resolution New made: %v\n%s", err, res)
	}
	for name, edit := range map[string]func(m map[string]any){
		"no schema":         func(m map[string]any) { delete(m, "schema") },
		"schema 2":          func(m map[string]any) { m["schema"] = 2 },
		"unknown kind":      func(m map[string]any) { m["finding"], m["kind"] = "made-up", "made-up" },
		"kind not aliasing": func(m map[string]any) { m["kind"] = "flapping" },
		"unknown field":     func(m map[string]any) { m["extra"] = 1 },
		"qp flat only":      func(m map[string]any) { delete(m, "qp"); m["qpn"] = 5 },
		"null evidence":     func(m map[string]any) { m["evidence"] = nil },
		"resolved finding":  func(m map[string]any) { m["resolved"] = true },
		"bad severity":      func(m map[string]any) { m["severity"] = "fatal" },
		"qpn too big":       func(m map[string]any) { m["qp"].(map[string]any)["qpn"] = 1 << 33 },
		"bad logged time":   func(m map[string]any) { m["logged"] = "yesterday" },
		"judged_at a time":  func(m map[string]any) { m["judged_at"] = "2026-01-01T00:00:00Z" },
		"judged_at below 0": func(m map[string]any) { m["judged_at"] = -1 },
	} {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		b, _ := json.Marshal(m)
		if err := findinglinetest.Check(b); err == nil {
			t.Errorf("%s: accepted %s", name, b)
		} else if strings.TrimSpace(err.Error()) == "" {
			t.Errorf("%s: an empty error", name)
		}
	}
}
