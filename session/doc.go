// Package session records a live event source to a recording file: the
// logic of `apmwatch record` (Record) and of `apmwatch trace --record` (Tee).
// Whatever ends the session (its duration, SIGINT, SIGTERM, the source
// ending), the probes are detached first, the events still buffered are
// drained into the file, then the source's counters are written and the
// file is closed, so nothing the probes delivered is lost.
package session
