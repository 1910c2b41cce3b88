package findingline_test

import (
	"encoding/json"
	"reflect"
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

// Within a version fields are only added: a line with fields this schema
// does not know, at any level, still validates (a reader of version 1
// ignores them).
func TestSchemaAllowsAddedFields(t *testing.T) {
	f := apm.Finding{ID: 1, Kind: apm.MissedRearm, Severity: apm.SevError, QP: apm.Key{Device: "ibsim0", QPN: 5},
		Evidence: []apm.Evidence{{Seq: 1, Boot: 2, What: "PATH_MIG"}}}
	good, err := json.Marshal(findingline.New(f, "h"))
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(m map[string]any){
		"a line's":      func(m map[string]any) { m["added_later"] = map[string]any{"x": 1} },
		"a qp's":        func(m map[string]any) { m["qp"].(map[string]any)["port"] = 1 },
		"an evidence's": func(m map[string]any) { m["evidence"].([]any)[0].(map[string]any)["cpu"] = 3 },
	} {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		b, _ := json.Marshal(m)
		if err := findinglinetest.Check(b); err != nil {
			t.Errorf("%s added field: %v\n%s", name, err, b)
		}
	}
}

// Every field a Line can carry is in the schema's properties: what the
// schema allows without naming it is for later versions, never for ours.
func TestEveryFieldInTheSchema(t *testing.T) {
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(findingline.JSONSchema, &doc); err != nil {
		t.Fatal(err)
	}
	for _, name := range jsonFields(reflect.TypeFor[findingline.Line]()) {
		if _, ok := doc.Properties[name]; !ok {
			t.Errorf("field %q of a line is not in the schema", name)
		}
	}
}

// jsonFields lists the JSON names of a struct's fields, embedded structs'
// inline.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}
