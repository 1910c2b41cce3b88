// Package session runs live sessions on an event source: `apmwatch trace`
// (RunTrace: events and the APM model's findings on screen) and `apmwatch
// record` (Record, and Tee for `trace --record`), both with ground-truth
// readings of rdma netlink merged into the stream (rdmanl.Merge).
// Whatever ends a session (its duration, SIGINT, SIGTERM, the source
// ending), the probes are detached first, the events still buffered are
// drained (into the model, the display, the file), then the source's
// counters are written, so nothing the probes delivered is lost.
package session
