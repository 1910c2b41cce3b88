// Package postmortem replays recordings through the APM model and reports
// what happened: a summary, the findings, per-QP timelines and, when
// recordings of both ends of a connection are given, pair timelines with
// aligned clocks and the pairing layer's own finding, one-sided-rearm.
// Two QPs pair only by the identity rule of package connid (destination
// QPNs both ways and paths leading to each other's ports, the ports'
// addresses proven by CM MADs); candidates it does not confirm are listed
// unpaired, with why, and judged by no two-sided finding.
//
// Data flows one way: recording files -> streams (one per writer session)
// -> one apm.Model per stream -> histories and findings -> pairing ->
// Report -> text, JSON or HTML. Nothing here does I/O on the system besides
// reading the files.
package postmortem
