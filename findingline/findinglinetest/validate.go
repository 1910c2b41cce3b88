// Package findinglinetest checks lines against the finding's JSON Schema
// (findingline.JSONSchema), for the tests of every output that writes
// findings.
package findinglinetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/apmwatch/apmwatch/findingline"
)

var (
	compiled    *jsonschema.Schema
	compileErr  error
	compileOnce sync.Once
)

// Schema returns the compiled schema.
func Schema() (*jsonschema.Schema, error) {
	compileOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(findingline.JSONSchema))
		if err != nil {
			compileErr = fmt.Errorf("reading the finding schema: %w", err)
			return
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		if err := c.AddResource("finding.schema.json", doc); err != nil {
			compileErr = fmt.Errorf("adding the finding schema: %w", err)
			return
		}
		compiled, compileErr = c.Compile("finding.schema.json")
	})
	return compiled, compileErr
}

// Check validates one JSON object against the schema, and the rules a
// JSON Schema cannot say: the deprecated aliases equal what they alias.
func Check(line []byte) error {
	s, err := Schema()
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return fmt.Errorf("not json: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return err
	}
	var l struct {
		Type     string `json:"type"`
		Finding  string `json:"finding"`
		Kind     string `json:"kind"`
		Resolved bool   `json:"resolved"`
		Resolves uint64 `json:"resolves"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return err
	}
	if l.Kind != l.Type && l.Kind != l.Finding {
		return fmt.Errorf("kind %q is neither type %q nor finding %q", l.Kind, l.Type, l.Finding)
	}
	if (l.Type == findingline.TypeResolution) != l.Resolved {
		return fmt.Errorf("type %q with resolved %v", l.Type, l.Resolved)
	}
	if l.Resolved && l.Resolves == 0 {
		return fmt.Errorf("a resolution resolves nothing")
	}
	return nil
}

// Lines checks every JSON line of b that is a finding or a resolution
// (has "schema" or a finding-like "type") and returns how many it checked.
func Lines(t testing.TB, b []byte) int {
	t.Helper()
	n := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var probe struct {
			Type string `json:"type"`
			Kind string `json:"kind"`
		}
		if json.Unmarshal(line, &probe) != nil {
			continue
		}
		if probe.Type != findingline.TypeFinding && probe.Type != findingline.TypeResolution &&
			probe.Kind != findingline.TypeFinding && probe.Kind != findingline.TypeResolution {
			continue
		}
		n++
		if err := Check(line); err != nil {
			t.Errorf("finding line against the schema: %v\n%s", err, line)
		}
	}
	return n
}
