// Package kindcheck holds one test: every event kind (event.Kinds) goes
// through every consumer that tells kinds apart, so a kind added to
// package event without its cases fails at once, naming what is missing.
// samples_test.go has one event of each kind, as its source makes it, and
// what each consumer must make of it; kinds_test.go runs them through the
// JSON and table outputs (package output), the recording codec (write,
// then read back), the model (package apm), postmortem's timelines and
// HTML marks, the fleet's connection records (fleet.Tracker) and the
// schema in docs/events.md. The probes' side, every kind a probe record
// carries decoding to its event, is collector/kinds_test.go.
package kindcheck
