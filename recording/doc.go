// Package recording writes and replays apmwatch recordings: an append-only,
// crash-safe file of event.Event values and source statistics, described in
// docs/recording.md.
//
// A Writer (Create, NewWriter) appends events and stats snapshots to a file;
// a Reader (Open, OpenWith) replays one or more files as an event.Source, so
// a consumer cannot tell a replay from the live collector. A file cut anywhere
// or damaged in places reads back everything that is still whole; what was
// lost is reported as Warning values, never printed and never a panic.
package recording
