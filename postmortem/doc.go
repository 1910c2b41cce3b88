// Package postmortem replays recordings through the APM model and reports
// what happened: a summary, the findings, per-QP timelines and, when
// recordings of both ends of a connection are given, pair timelines with
// aligned clocks and the pairing layer's own finding, one-sided-rearm.
//
// Data flows one way: recording files -> streams (one per writer session)
// -> one apm.Model per stream -> histories and findings -> pairing ->
// Report -> text, JSON or HTML. Nothing here does I/O on the system besides
// reading the files.
package postmortem
