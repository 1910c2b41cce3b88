package hcacheck

import (
	"context"
	"fmt"
	"strings"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/uverbs"
)

// The points answered by driving the pair through migrations: the forced
// migration (its PATH_MIG and timing, the alternate after it, the
// responder's event), COMM_EST and one-way arming after it, the dead
// alternate.

// forced: MIGRATED on A while ARMED. Whether PATH_MIG on A was readable
// when the modify returned, came later or not at all; the alternate A
// reads then; and, once A sent on its new path, whether B migrated too.
func (c *checker) forced(ctx context.Context) error {
	before, err := c.query(c.a)
	if err != nil {
		return err
	}
	if err := c.pump(); err != nil {
		return err
	}
	c.migAt = len(c.events)
	merr := c.setMig(c.a, event.MigMigrated)
	if err := c.pump(); err != nil { // poll(0) right after the write returned
		return err
	}
	atReturn := c.has(c.migAt, "A", event.EvPathMig)
	if merr != nil {
		c.add(Point{Point: PtForcedEvent, Answer: AnsError, Errno: errnoName(merr), Event: c.eventsText(c.migAt),
			Detail: "the forced migration (MIGRATED on ARMED A) failed"})
		return fmt.Errorf("the forced migration was refused (%s): the points after it need one", errnoName(merr))
	}
	later := false
	if !atReturn {
		if later, err = c.wait(ctx, c.cfg.EventWait, func() (bool, error) { return c.has(c.migAt, "A", event.EvPathMig), nil }); err != nil {
			return err
		}
	}
	after, err := c.query(c.a)
	if err != nil {
		return err
	}
	ans := decideForcedEvent(atReturn, later)
	detail := map[string]string{AnsInside: "PATH_MIG on A readable when the modify returned",
		AnsAfter: "PATH_MIG on A after the modify returned", AnsNone: fmt.Sprintf("no PATH_MIG on A within %v", c.cfg.EventWait)}[ans]
	moved := primaryOf(after) == alternateOf(before)
	if !moved {
		detail += fmt.Sprintf("; A's primary did not move to its alternate (port %d DLID %d)", before.AltPortNum, before.AltDest.DLID)
	}
	c.add(Point{Point: PtForcedEvent, Answer: ans, Errno: errnoName(merr), Event: c.eventsText(c.migAt),
		Detail: fmt.Sprintf("%s; A reads %s", detail, event.MigState(after.PathMigState))})
	c.add(Point{Point: PtAltAfterMig, Answer: decideAlt(after, primaryOf(before)),
		Detail: fmt.Sprintf("before: primary %s, alternate %s; after: primary %s, alternate %s",
			pathText(primaryOf(before)), pathText(alternateOf(before)), pathText(primaryOf(after)), pathText(alternateOf(after)))})

	from := len(c.events)
	wr, err := c.send(c.a)
	if err != nil {
		return err
	}
	if _, err := c.wait(ctx, c.cfg.EventWait, func() (bool, error) {
		return c.has(c.migAt, "B", event.EvPathMig) && c.completed(c.a, wr), nil
	}); err != nil {
		return err
	}
	ans = AnsNone
	if c.has(c.migAt, "B", event.EvPathMig) {
		ans = AnsRaised
	}
	c.add(Point{Point: PtResponderEv, Answer: ans, Event: c.eventsText(from),
		Detail: fmt.Sprintf("after one send from A on its new path: %s; A's send %s", c.states(c.a, c.bq), c.wcText(c.a, wr))})
	return nil
}

func pathText(p path) string {
	if p.Bits != 0 {
		return fmt.Sprintf("port %d DLID %d bits %d", p.Port, p.DLID, p.Bits)
	}
	return fmt.Sprintf("port %d DLID %d", p.Port, p.DLID)
}

// oneWay: both QPs rearm after the migration (a new alternate first:
// the old primary's path), then only A sends one request. Also whether
// either QP raised COMM_EST since the migration.
func (c *checker) oneWay(ctx context.Context) error {
	var before []string
	for _, q := range []*qp{c.a, c.bq} {
		m, err := c.mig(q)
		if err != nil {
			return err
		}
		before = append(before, q.name+" "+m.String())
		if m == event.MigMigrated {
			if err := c.loadAlt(q, c.prim); err != nil {
				return fmt.Errorf("QP %s: loading a new alternate: %w", q.name, err)
			}
			if err := c.setMig(q, event.MigRearm); err != nil {
				return fmt.Errorf("REARM on QP %s after the migration: %w", q.name, err)
			}
		}
	}
	rearmed := c.states(c.a, c.bq)
	from := len(c.events)
	wr, err := c.send(c.a)
	if err != nil {
		return err
	}
	if _, err := c.wait(ctx, c.cfg.ArmWait, c.armed(c.a, c.bq)); err != nil {
		return err
	}
	ma, err := c.mig(c.a)
	if err != nil {
		return err
	}
	mb, err := c.mig(c.bq)
	if err != nil {
		return err
	}
	c.add(Point{Point: PtOneWayArm, Answer: decideOneWay(ma == event.MigArmed, mb == event.MigArmed), Event: c.eventsText(from),
		Detail: fmt.Sprintf("before the rearms: %s; rearmed: %s; after one send from A (%s): A %s, B %s",
			strings.Join(before, ", "), rearmed, c.wcText(c.a, wr), ma, mb)})

	var ce []string
	for _, s := range c.events[c.migAt:] {
		if s.typ == event.EvCommEst {
			ce = append(ce, s.String())
		}
	}
	ans := AnsNone
	if len(ce) > 0 {
		ans = AnsRaised
	}
	c.add(Point{Point: PtCommEstAfter, Answer: ans, Event: strings.Join(ce, " "),
		Detail: "COMM_EST on A or B from the forced migration to the end of one-way-arm (IBTA: only the first packet in RTR raises it)"})
	return nil
}

// deadAlt: A, ARMED, gets an alternate to a LID no port answers; B goes to
// ERR (stops answering); A posts one send. Its retries run out on the
// primary: a blind migration (PATH_MIG) and then RETRY_EXC_ERR on the dead
// alternate, or PATH_MIG_ERR.
func (c *checker) deadAlt(ctx context.Context) error {
	if ok, err := c.armed(c.a, c.bq)(); err != nil {
		return err
	} else if !ok {
		if err := c.arm(ctx, "before dead-alternate", c.a, c.bq); err != nil {
			return err
		}
	}
	cur, err := c.query(c.a)
	if err != nil {
		return err
	}
	port := c.prim.Port
	if cur.PortNum == c.prim.Port {
		port = c.alt.Port
	}
	dead := path{Port: port, DLID: c.cfg.DeadLID}
	if err := c.loadAlt(c.a, dead); err != nil {
		return fmt.Errorf("QP A: loading the dead alternate (%s): %w", pathText(dead), err)
	}
	if ok, err := c.armed(c.a)(); err != nil {
		return err
	} else if !ok {
		if err := c.arm(ctx, "after loading the dead alternate", c.a); err != nil {
			return err
		}
	}
	if err := c.pump(); err != nil {
		return err
	}
	from := len(c.events)
	if err := c.modify(c.bq, uverbs.Modify{AttrMask: event.AttrState, State: uint8(event.StateErr)}); err != nil {
		return fmt.Errorf("QP B to ERR: %w", err)
	}
	wr, err := c.send(c.a)
	if err != nil {
		return err
	}
	var s deadSeen
	look := func() (bool, error) {
		w, ok := c.wc(c.a, wr)
		s = deadSeen{PathMig: c.has(from, "A", event.EvPathMig), PathMigErr: c.has(from, "A", event.EvPathMigErr),
			RetryExc: ok && w.Status == uverbs.WCRetryExcErr}
		a, err := c.query(c.a)
		if err != nil {
			return false, err
		}
		s.Err = event.QPState(a.State) == event.StateErr
		return s.PathMigErr || s.RetryExc || s.Err, nil
	}
	if _, err := c.wait(ctx, c.cfg.FailWait, look); err != nil {
		return err
	}
	// A little longer, for what follows the first sign.
	if _, err := c.wait(ctx, c.cfg.EventWait/4, func() (bool, error) { return false, nil }); err != nil {
		return err
	}
	if _, err := look(); err != nil {
		return err
	}
	c.add(Point{Point: PtDeadAlt, Answer: decideDeadAlt(s), Event: c.eventsText(from),
		Detail: fmt.Sprintf("alternate %s, B in ERR; A's send %s; %s", pathText(dead), c.wcText(c.a, wr), c.states(c.a))})
	return nil
}
