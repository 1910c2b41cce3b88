// Package event defines the decoded APM events that flow from a source
// (the live collector or a recording) to the per-QP model. It is pure data:
// no BPF, no I/O. Every source produces these types and every consumer reads
// only these types, so a consumer cannot tell a live host from a replay.
package event

import (
	"fmt"
	"time"
)

// Kind names what happened. The string forms are a stable interface
// (JSON "kind" field, --kind filters): keep them.
type Kind uint8

const (
	KindUnknown   Kind = iota
	KindModify         // ib_modify_qp / ib_modify_qp_with_udata, entry and exit joined
	KindQPEvent        // affiliated async event on a QP (PATH_MIG, COMM_EST, ...)
	KindPortEvent      // port or device event (PORT_ACTIVE, PORT_ERR, ...)
	KindCMNotify       // ib_cm_notify(cm_id, event) and its return code
	KindCMHandler      // cm_lap_handler / cm_apr_handler and their return code
	KindMAD            // a CM-class MAD sent or received (ib_mad tracepoints)
	KindQPCreate       // a QP was created (starts a new history for its QPN)
	KindQPDestroy      // a QP was destroyed
	KindTruth          // a ground-truth reading of a QP (rdma netlink), not a probe's record
	// KindModifyEntry: a modify of the APM attributes (alternate path,
	// migration state) entered. Its KindModify record, stamped at the same
	// entry, follows when the call returns; meanwhile the call is in
	// progress (Modify carries the call's attributes, no paths, no Ret).
	KindModifyEntry
	kindCount
)

var kindNames = [...]string{
	KindUnknown:     "unknown",
	KindModify:      "modify",
	KindQPEvent:     "qp-event",
	KindPortEvent:   "port-event",
	KindCMNotify:    "cm-notify",
	KindCMHandler:   "cm-handler",
	KindMAD:         "mad",
	KindQPCreate:    "qp-create",
	KindQPDestroy:   "qp-destroy",
	KindTruth:       "qp-truth",
	KindModifyEntry: "modify-entry",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Kinds lists every known kind, in order.
func Kinds() []Kind {
	out := make([]Kind, 0, kindCount-1)
	for k := KindModify; k < kindCount; k++ {
		out = append(out, k)
	}
	return out
}

// ParseKind turns a kind name back into a Kind.
func ParseKind(s string) (Kind, error) {
	for k, n := range kindNames {
		if n == s && Kind(k) != KindUnknown {
			return Kind(k), nil
		}
	}
	return KindUnknown, fmt.Errorf("unknown event kind %q", s)
}

// QPKey identifies a QP on one host. QPNs are reused after destroy; the model
// adds a generation on top of this key.
type QPKey struct {
	Device string
	QPN    uint32
}

func (k QPKey) String() string { return fmt.Sprintf("%s/%d", k.Device, k.QPN) }

// Origin says who drives a QP.
type Origin uint8

const (
	OriginUnknown Origin = iota
	OriginKernel         // a kernel ULP (NFS/RDMA, SRP, iSER, RDS, IPoIB-CM, ...)
	OriginUser           // a userspace process through ib_uverbs
)

func (o Origin) String() string {
	switch o {
	case OriginKernel:
		return "kernel"
	case OriginUser:
		return "user"
	}
	return "unknown"
}

// Event is one decoded record. Exactly one of the payload pointers matching
// Kind is set.
type Event struct {
	Seq  uint64    // per-source sequence number, from 1; 0 for a ground-truth reading (KindTruth)
	Kind Kind      //
	Boot uint64    // CLOCK_BOOTTIME, nanoseconds
	Time time.Time // wall clock (Boot plus the source's boot-to-wall offset)
	CPU  uint32
	PID  uint32 // thread group id (the process); for KindTruth the QP's owner
	TID  uint32
	Comm string

	Device string // RDMA device name; empty when the hook cannot see it
	QPN    uint32 // 0 when the record is not about one QP

	Modify  *Modify
	QP      *QPEvent
	Port    *PortEvent
	Notify  *CMNotify
	Handler *CMHandler
	MAD     *MAD
	Life    *QPLife // set for KindQPCreate and KindQPDestroy
	Truth   *Truth  // set for KindTruth
}

// Key returns the QP this event is about.
func (e *Event) Key() QPKey { return QPKey{Device: e.Device, QPN: e.QPN} }
