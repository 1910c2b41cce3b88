package hcacheck

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/uverbs"
)

// The checker's operations on the pair: modifies, queries, sends, reading
// async events and completions, waiting, arming.

// seen is one async event read.
type seen struct {
	qp  string // "A", "B", or "" (not a QP event of ours)
	typ event.EventType
}

func (s seen) String() string {
	if s.qp == "" {
		return s.typ.String()
	}
	return s.qp + ":" + s.typ.String()
}

func (c *checker) modify(q *qp, m uverbs.Modify) error {
	m.Handle = q.Handle
	return c.b.Modify(&m)
}

func (c *checker) setMig(q *qp, s event.MigState) error {
	return c.modify(q, uverbs.Modify{AttrMask: event.AttrPathMigState, PathMigState: uint8(s)})
}

func (c *checker) loadAlt(q *qp, p path) error {
	return c.modify(q, uverbs.Modify{AttrMask: event.AttrAltPath, AltDest: dest(p), AltPortNum: p.Port, AltTimeout: c.cfg.Timeout})
}

func (c *checker) query(q *qp) (uverbs.Attr, error) {
	a, err := c.b.Query(q.Handle)
	if err != nil {
		return a, fmt.Errorf("QUERY_QP %s: %w", q.name, err)
	}
	return a, nil
}

func (c *checker) mig(q *qp) (event.MigState, error) {
	a, err := c.query(q)
	return event.MigState(a.PathMigState), err
}

func (c *checker) send(q *qp) (uint64, error) {
	c.wrID++
	if err := c.b.PostSend(q.Handle, c.wrID); err != nil {
		return 0, fmt.Errorf("POST_SEND on %s: %w", q.name, err)
	}
	return c.wrID, nil
}

// pump reads every async event and completion there is now.
func (c *checker) pump() error {
	for {
		ev, ok, err := c.b.NextEvent(0)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		s := seen{typ: event.EventType(ev.Type)}
		if qpEvent(s.typ) {
			switch ev.Element {
			case uhA:
				s.qp = "A"
			case uhB:
				s.qp = "B"
			}
		}
		c.events = append(c.events, s)
	}
	for {
		wcs, err := c.b.Poll(c.cq)
		if err != nil {
			return fmt.Errorf("POLL_CQ: %w", err)
		}
		c.wcs = append(c.wcs, wcs...)
		if len(wcs) < pollBatch {
			return nil
		}
	}
}

func qpEvent(t event.EventType) bool {
	switch t {
	case event.EvQPFatal, event.EvQPReqErr, event.EvQPAccessErr, event.EvCommEst, event.EvSQDrained,
		event.EvPathMig, event.EvPathMigErr, event.EvQPLastWQEReached:
		return true
	}
	return false
}

// has reports an event of type t on QP name at index from or later.
func (c *checker) has(from int, name string, t event.EventType) bool {
	for _, s := range c.events[from:] {
		if s.qp == name && s.typ == t {
			return true
		}
	}
	return false
}

// eventsText lists the events from index from: "A:PATH_MIG B:PATH_MIG".
func (c *checker) eventsText(from int) string {
	var b strings.Builder
	for i, s := range c.events[from:] {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// wait pumps until cond holds or d has passed; false on timeout.
func (c *checker) wait(ctx context.Context, d time.Duration, cond func() (bool, error)) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		if err := c.pump(); err != nil {
			return false, err
		}
		ok, err := cond()
		if ok || err != nil {
			return ok, err
		}
		if !time.Now().Before(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("interrupted: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// armed reports whether every QP reads ARMED.
func (c *checker) armed(qs ...*qp) func() (bool, error) {
	return func() (bool, error) {
		for _, q := range qs {
			m, err := c.mig(q)
			if err != nil || m != event.MigArmed {
				return false, err
			}
		}
		return true, nil
	}
}

// states reads "A ARMED, B REARM".
func (c *checker) states(qs ...*qp) string {
	parts := make([]string, len(qs))
	for i, q := range qs {
		a, err := c.query(q)
		if err != nil {
			parts[i] = q.name + " unreadable (" + errnoName(err) + ")"
			continue
		}
		parts[i] = fmt.Sprintf("%s %s/%s", q.name, event.QPState(a.State), event.MigState(a.PathMigState))
	}
	return strings.Join(parts, ", ")
}

// arm rearms each QP that is not ARMED (MIGRATED: REARM), posts one send
// on each and waits until all read ARMED: each request's ACK carries the
// responder's MigReq.
func (c *checker) arm(ctx context.Context, when string, qs ...*qp) error {
	for _, q := range qs {
		m, err := c.mig(q)
		if err != nil {
			return err
		}
		if m == event.MigMigrated {
			if err := c.setMig(q, event.MigRearm); err != nil {
				return fmt.Errorf("REARM on QP %s %s: %w", q.name, when, err)
			}
		}
	}
	for _, q := range qs {
		if _, err := c.send(q); err != nil {
			return err
		}
	}
	ok, err := c.wait(ctx, c.cfg.ArmWait, c.armed(qs...))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("not ARMED %s within %v of one send each: %s", when, c.cfg.ArmWait, c.states(qs...))
	}
	return nil
}

// wc returns the completion of q's send wr, if it came.
func (c *checker) wc(q *qp, wr uint64) (uverbs.WC, bool) {
	for _, w := range c.wcs {
		if w.QPN == q.QPN && w.WRID == wr {
			return w, true
		}
	}
	return uverbs.WC{}, false
}

func (c *checker) completed(q *qp, wr uint64) bool {
	_, ok := c.wc(q, wr)
	return ok
}

func (c *checker) wcText(q *qp, wr uint64) string {
	w, ok := c.wc(q, wr)
	if !ok {
		return "not completed"
	}
	return "completed " + uverbs.WCStatusName(w.Status)
}
