package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/apmwatch/apmwatch/findingline"
)

// apmwatch schema prints the finding schema built into the binary.
func TestSchemaCommand(t *testing.T) {
	out, err := run("schema")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal([]byte(out), findingline.JSONSchema) || !json.Valid([]byte(out)) {
		t.Errorf("apmwatch schema printed\n%s", out)
	}
	var doc struct {
		ID string `json:"$id"`
	}
	if json.Unmarshal([]byte(out), &doc) != nil || doc.ID == "" {
		t.Errorf("no $id in %s", out)
	}
}
