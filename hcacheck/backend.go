package hcacheck

import (
	"time"

	"github.com/apmwatch/apmwatch/internal/uverbs"
)

// Backend is what the check needs from a verbs stack: one device context
// with its async events, a PD, a CQ, RC QPs and the verbs on them. Errors
// from the kernel wrap their errno (errors.As a unix.Errno), which the
// check reports.
//
// The raw uverbs backend (NewRaw) writes the commands itself; it works on
// drivers whose create commands need no provider-specific data. A device
// whose driver needs its userspace provider's queue buffers (mlx4, mlx5,
// mthca, ...) needs a libibverbs backend, which does not exist yet.
type Backend interface {
	// Open opens the device's uverbs file and gets a context.
	Open(dev string) error
	AllocPD() (uint32, error)
	CreateCQ(cqe uint32) (uint32, error)
	// CreateQP makes an RC QP on pd whose send and receive completions go
	// to cq; userHandle comes back as the element of its async events.
	CreateQP(pd, cq uint32, userHandle uint64) (QP, error)
	Modify(m *uverbs.Modify) error
	Query(qp uint32) (uverbs.Attr, error)
	// PostSend posts one signaled zero-length SEND.
	PostSend(qp uint32, wrID uint64) error
	// PostRecv posts one receive for a zero-length message.
	PostRecv(qp uint32, wrID uint64) error
	// Poll returns the completions waiting on cq (at most a few dozen).
	Poll(cq uint32) ([]uverbs.WC, error)
	// NextEvent returns the next async event of the context, waiting at
	// most wait for one (0: only one already there); ok is false if none.
	NextEvent(wait time.Duration) (ev uverbs.AsyncEvent, ok bool, err error)
	DestroyQP(qp uint32) error
	DestroyCQ(cq uint32) error
	DeallocPD(pd uint32) error
	// Close releases the context (the kernel destroys whatever is left).
	Close() error
}

// QP is a QP the backend made.
type QP struct {
	Handle uint32
	QPN    uint32
}
