package hcacheck

import (
	"context"
	"errors"
	"fmt"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/uverbs"
)

// The loopback pair: its two QPs, made and connected (setup) and
// destroyed with the PD and CQ (teardown).

// User handles of the two QPs: the element of their async events. Far
// from port numbers, the element of port events.
const (
	uhA = 0xa0c0_0000_0000_000a
	uhB = 0xa0c0_0000_0000_000b
)

type qp struct {
	name string // "A" or "B"
	QP
}

// Attribute mask bits the check sets beyond event's.
const (
	attrMaxQPRdAtomic   = 1 << 13
	attrMaxDestRdAtomic = 1 << 17
	accessRemoteWrite   = 1 << 1
	accessRemoteRead    = 1 << 2
	mtu2048             = 4
	recvsPerQP          = 16
)

func dest(p path) uverbs.Dest { return uverbs.Dest{DLID: p.DLID, SrcPathBits: p.Bits, PortNum: p.Port} }

// providerHint is added to create errors: on an unknown driver the first
// sign that it needs provider data is its create verb failing.
const providerHint = " (if the driver needs its userspace provider's data, only a libibverbs backend can make QPs on it)"

func (c *checker) setup(context.Context) error {
	var err error
	if c.pd, err = c.b.AllocPD(); err != nil {
		return fmt.Errorf("ALLOC_PD: %w", err)
	}
	c.havePD = true
	if c.cq, err = c.b.CreateCQ(64); err != nil {
		return fmt.Errorf("CREATE_CQ: %w%s", err, providerHint)
	}
	c.haveCQ = true
	for _, n := range []struct {
		name string
		uh   uint64
	}{{"A", uhA}, {"B", uhB}} {
		q, err := c.b.CreateQP(c.pd, c.cq, n.uh)
		if err != nil {
			return fmt.Errorf("CREATE_QP %s: %w%s", n.name, err, providerHint)
		}
		c.made = append(c.made, &qp{name: n.name, QP: q})
	}
	c.a, c.bq = c.made[0], c.made[1]
	c.rep.QPN = map[string]uint32{"A": c.a.QPN, "B": c.bq.QPN}
	for _, q := range c.made {
		if err := c.modify(q, uverbs.Modify{AttrMask: event.AttrState | event.AttrPKeyIndex | event.AttrPort | event.AttrAccessFlags,
			State: uint8(event.StateInit), PortNum: c.prim.Port, AccessFlags: accessRemoteWrite | accessRemoteRead}); err != nil {
			return fmt.Errorf("QP %s to INIT: %w", q.name, err)
		}
		for i := 0; i < recvsPerQP; i++ {
			if err := c.b.PostRecv(q.Handle, uint64(1000+i)); err != nil {
				return fmt.Errorf("QP %s: POST_RECV: %w", q.name, err)
			}
		}
	}
	for _, q := range c.made {
		peer := c.peer(q)
		if err := c.modify(q, uverbs.Modify{AttrMask: event.AttrState | event.AttrAV | event.AttrPathMTU | event.AttrDestQPN |
			event.AttrRQPSN | attrMaxDestRdAtomic | event.AttrMinRNRTimer,
			State: uint8(event.StateRTR), Dest: dest(c.prim), PathMTU: mtu2048, DestQPN: peer.QPN,
			MaxDestRdAtomic: 1, MinRNRTimer: 12}); err != nil {
			return fmt.Errorf("QP %s to RTR: %w", q.name, err)
		}
	}
	for _, q := range c.made {
		if err := c.modify(q, uverbs.Modify{AttrMask: event.AttrState | event.AttrTimeout | event.AttrRetryCnt |
			event.AttrRNRRetry | event.AttrSQPSN | attrMaxQPRdAtomic,
			State: uint8(event.StateRTS), Timeout: c.cfg.Timeout, RetryCnt: c.cfg.RetryCnt, RNRRetry: 3, MaxRdAtomic: 1}); err != nil {
			return fmt.Errorf("QP %s to RTS: %w", q.name, err)
		}
		if q == c.a {
			if err := c.unloadedAlt(); err != nil {
				return err
			}
		}
		if err := c.loadAlt(q, c.alt); err != nil {
			return fmt.Errorf("QP %s: loading the alternate path: %w", q.name, err)
		}
	}
	return nil
}

func (c *checker) peer(q *qp) *qp {
	if q == c.a {
		return c.bq
	}
	return c.a
}

// teardown destroys what was made, newest first.
func (c *checker) teardown() error {
	var errs []error
	for i := len(c.made) - 1; i >= 0; i-- {
		if err := c.b.DestroyQP(c.made[i].Handle); err != nil {
			errs = append(errs, fmt.Errorf("destroying QP %s (%d): %w", c.made[i].name, c.made[i].QPN, err))
		}
	}
	if c.haveCQ {
		if err := c.b.DestroyCQ(c.cq); err != nil {
			errs = append(errs, fmt.Errorf("destroying the CQ: %w", err))
		}
	}
	if c.havePD {
		if err := c.b.DeallocPD(c.pd); err != nil {
			errs = append(errs, fmt.Errorf("deallocating the PD: %w", err))
		}
	}
	if err := c.b.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the device: %w", err))
	}
	if len(errs) > 0 {
		errs = append(errs, errors.New("closing the uverbs file released whatever was left"))
	}
	return errors.Join(errs...)
}

// unloadedAlt answers unloaded-alt-port: the alternate port QUERY_QP reads
// on A in RTS before any alternate was loaded. rdmavt and mlx5 read 0 (no
// address vector); mlx4 decodes the port from the unused path's
// sched_queue bit, 1 when the firmware left it zero. ib_uverbs refuses an
// alternate load whose address vector port differs from alt_port_num, so
// an application that loads its alternate on top of a query without
// setting the port (Open MPI's openib) gets through only when this reads
// the port it asks for.
func (c *checker) unloadedAlt() error {
	a, err := c.query(c.a)
	if err != nil {
		return err
	}
	c.add(Point{Point: PtUnloadedAlt, Answer: fmt.Sprint(a.AltDest.PortNum),
		Detail: fmt.Sprintf("QUERY_QP A in RTS, no alternate loaded: alt_dest.port_num %d, alt_port_num %d, alt_dest.dlid %d",
			a.AltDest.PortNum, a.AltPortNum, a.AltDest.DLID)})
	return nil
}
