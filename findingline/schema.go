package findingline

import _ "embed"

// JSONSchema is the JSON Schema (draft 2020-12) of a Line in every output
// (schema.json; docs/events.md links it). Its kind enum lists every kind
// of apm's registry (schema_test.go).
//
//go:embed schema.json
var JSONSchema []byte
