// Package findingline is the one JSON shape of a finding or a resolution,
// written by every output that carries findings: trace's JSON stream, the
// audit daemon's finding log and its NATS lines, the postmortem report and
// the fleet's lines (docs/events.md, "Findings"; the JSON Schema is
// schema.json, embedded as JSONSchema). It sits below every mode that
// writes it, so none of them imports another for it.
//
// Files: line.go (the Line type, its schema version and constructor),
// schema.go (the embedded JSON Schema).
package findingline
