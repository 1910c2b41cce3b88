package actuator

import (
	"fmt"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
)

// QUERY_QP does not return the local QPN and the kernel reuses uverbs
// handle ids (the lowest free one), so a handle that named the QP a moment
// ago may name a new QP of the same owner now. Every reading through the
// handle is therefore compared with rdma netlink's row of the QPN, and
// netlink is read again around the change: the QP must still be listed,
// owned by the same process, and agree with the handle.

// sameQP says how a QUERY_QP reading differs from a netlink row in what
// both show and what cannot change under software's feet (remote QPN,
// state); "" when they agree. Netlink shows no address vectors, so the
// paths themselves cannot be compared, and its port only breaks ties
// (samePort).
func sameQP(a Attr, row rdmanl.QP) string {
	switch {
	case row.HasRemote && a.DestQPN != row.RQPN:
		return fmt.Sprintf("the handle reads remote qpn %d, rdma netlink %d", a.DestQPN, row.RQPN)
	case event.QPState(a.State) != row.State:
		return fmt.Sprintf("the handle reads %s, rdma netlink %s", event.QPState(a.State), row.State)
	}
	return ""
}

// samePort: rdma netlink shows the port software last set (ib_core's
// qp->port, changed only by a modify with IB_QP_PORT), QUERY_QP the ports
// of the paths. An APM migration copies the alternate into the primary
// (IBTA; hfi1/qib *_migrate_qp; the mlx drivers only move their own port),
// so after one both paths may be on a port netlink does not show: a port
// that agrees (or 0, not set yet) tells two candidates apart, one that
// does not proves nothing.
func samePort(a Attr, port uint32) bool {
	return port == 0 || uint32(a.PortNum) == port || uint32(a.AltPortNum) == port
}

// confirm reads rdma netlink again and checks that the QP is still listed,
// by the target's owner, and agrees with the reading through the handle.
func (a *Actuator) confirm(t *Target, at Attr, when string) (rdmanl.QP, error) {
	rows, err := a.find(t.Device, t.QPN)
	if err != nil {
		return rdmanl.QP{}, fmt.Errorf("%s: reading rdma netlink: %w", when, err)
	}
	for _, row := range rows {
		if row.Device != t.Device || row.LQPN != t.QPN {
			continue
		}
		if int(row.PID) != t.PID || row.Kernel {
			return row, fmt.Errorf("%w: %s: qp %d on %s now belongs to pid %d (%s), not %d", ErrGone, when, t.QPN, t.Device, row.PID, row.Comm, t.PID)
		}
		if d := sameQP(at, row); d != "" {
			return row, fmt.Errorf("%w: %s: handle %d of pid %d no longer names qp %d: %s", ErrGone, when, t.Handle, t.PID, t.QPN, d)
		}
		return row, nil
	}
	return rdmanl.QP{}, fmt.Errorf("%w: %s: qp %d is no longer in rdma netlink", ErrGone, when, t.QPN)
}

// verifyNetlink checks the change as rdma netlink reports it, by QPN: the
// handle alone could name another QP.
func verifyNetlink(r *Request, t *Target, row rdmanl.QP) error {
	if !row.HasPathMig {
		return nil
	}
	ok := true
	switch r.Op {
	case OpRearm:
		ok = row.PathMig == event.MigRearm || row.PathMig == event.MigArmed
	case OpMigrate:
		ok = row.PathMig == event.MigMigrated
	}
	if !ok {
		return fmt.Errorf("%w: rdma netlink reads qp %d as %s after %s", ErrWrongState, t.QPN, row.PathMig, r.Op)
	}
	return nil
}
