// Package hcacheck is `apmwatch hca-check`: it asks the user's own HCA the
// questions about path migration that no driver source answers (ConnectX
// firmware decides them) and that the lab's simulated HCA has a knob for.
// It makes its own loopback RC pair on one device (QP A and QP B, both with
// their primary path on --port and the alternate on --alt-port), arms it,
// drives each point, reports what the device answered with the errno,
// async events and QUERY_QP readings seen, and destroys everything it made.
// It touches no other QP.
package hcacheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/uverbs"
)

// Config is one check.
type Config struct {
	Device  string
	Port    uint8 // the primary path's port
	AltPort uint8 // the alternate's port; equal to Port: an LMC path on it (or, with LMC 0, the same path)
	// DeadLID is the DLID of the dead alternate (a LID no port answers).
	DeadLID uint16
	// Timeout and RetryCnt are the QPs' local ACK timeout exponent (4.096
	// us << Timeout per try; also the alternate's) and retry count: small,
	// so that the dead-alternate point's retries run out fast.
	Timeout, RetryCnt uint8
	ArmWait           time.Duration // for both QPs to read ARMED after their sends
	EventWait         time.Duration // for an async event that is expected, or for "after"
	FailWait          time.Duration // for the dead-alternate point's retries to run out
}

// DefaultConfig: ports 1 and 2; timeout 12 (16.8 ms per try) and retry_cnt
// 3 (4 tries: 67 ms per path, well under a second for both paths).
func DefaultConfig() Config {
	return Config{Port: 1, AltPort: 2, DeadLID: 0xbfff, Timeout: 12, RetryCnt: 3,
		ArmWait: 5 * time.Second, EventWait: time.Second, FailWait: 3 * time.Second}
}

// Validate checks the values a flag can get wrong.
func (c *Config) Validate() error {
	if err := CheckDeviceName(c.Device); err != nil {
		return err
	}
	switch {
	case c.Port == 0 || c.AltPort == 0:
		return errors.New("--port and --alt-port must be 1 to 255")
	case c.DeadLID == 0 || c.DeadLID >= 0xc000:
		return fmt.Errorf("--dead-lid %d is no unicast LID (1 to 49151)", c.DeadLID)
	case c.Timeout == 0 || c.Timeout > 31:
		return fmt.Errorf("--timeout %d: want 1 to 31 (0 would wait for ever)", c.Timeout)
	case c.RetryCnt > 7:
		return fmt.Errorf("--retry-cnt %d: want 0 to 7", c.RetryCnt)
	case c.ArmWait <= 0 || c.EventWait <= 0 || c.FailWait <= 0:
		return errors.New("the waits must be positive")
	}
	return nil
}

// Deps are what Run uses from the host.
type Deps struct {
	Sys     string         // the sysfs root ("/sys")
	Backend func() Backend // nil: the raw uverbs backend on /dev
	Stdout  io.Writer
}

// Run checks the device and prints the report (also the part done before
// an error or an interrupt, then the error).
func Run(ctx context.Context, cfg Config, asJSON bool, d Deps) error {
	rep, err := Check(ctx, cfg, d)
	if rep != nil {
		if werr := rep.Write(d.Stdout, asJSON); werr != nil {
			return errors.Join(err, werr)
		}
	}
	return err
}

// User handles of the two QPs: the element of their async events. Far
// from port numbers, the element of port events.
const (
	uhA = 0xa0c0_0000_0000_000a
	uhB = 0xa0c0_0000_0000_000b
)

// Check runs every point on the device. The report is nil when the device
// was refused; otherwise it holds every point driven before an error.
// Whatever was made is destroyed before it returns.
func Check(ctx context.Context, cfg Config, d Deps) (rep *Report, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Sys == "" {
		d.Sys = "/sys"
	}
	ports := []uint8{cfg.Port}
	if cfg.AltPort != cfg.Port {
		ports = append(ports, cfg.AltPort)
	}
	info, err := inspect(d.Sys, cfg.Device, ports...)
	if err != nil {
		return nil, err
	}
	c := &checker{cfg: cfg, info: info, rep: &Report{Device: cfg.Device, Port: cfg.Port, AltPort: cfg.AltPort,
		Driver: info.Driver, Knobs: map[string]string{}}}
	if err := c.paths(); err != nil {
		return nil, err
	}
	if d.Backend != nil {
		c.b = d.Backend()
	} else {
		c.b = NewRaw(d.Sys, "/dev")
	}
	if err := c.b.Open(cfg.Device); err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", cfg.Device, err), c.b.Close())
	}
	defer func() {
		if terr := c.teardown(); terr != nil {
			err = errors.Join(err, terr)
		}
		slices.SortStableFunc(c.rep.Points, func(x, y Point) int { return order(x.Point) - order(y.Point) })
		c.rep.Knobs = knobs(c.rep.Points)
	}()
	return c.rep, c.run(ctx)
}

// pointOrder is the order of the report: the order of the list.
var pointOrder = []string{PtArmedModify, PtRearmOnArmed, PtMigFromRearm, PtForcedEvent, PtResponderEv,
	PtAltAfterMig, PtCommEstAfter, PtOneWayArm, PtDeadAlt}

func order(p string) int { return slices.Index(pointOrder, p) }

type qp struct {
	name string // "A" or "B"
	QP
}

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

type checker struct {
	cfg    Config
	info   deviceInfo
	b      Backend
	rep    *Report
	pd, cq uint32
	havePD bool
	haveCQ bool
	made   []*qp
	a, bq  *qp
	prim   path // the primary path of both QPs at setup
	alt    path // their alternate at setup
	events []seen
	wcs    []uverbs.WC
	wrID   uint64
	migAt  int // index in events of the forced migration
}

// paths works out the primary and alternate paths and says how.
func (c *checker) paths() error {
	p, q := c.info.Ports[c.cfg.Port], c.info.Ports[c.cfg.AltPort]
	c.prim = path{Port: c.cfg.Port, DLID: p.LID}
	c.alt = path{Port: c.cfg.AltPort, DLID: q.LID}
	if c.cfg.AltPort == c.cfg.Port {
		if p.LMC > 0 {
			c.alt = path{Port: c.cfg.Port, DLID: p.LID + 1, Bits: 1}
			c.note("the alternate is the LMC path of port %d (DLID %d, source path bits 1)", c.cfg.Port, p.LID+1)
		} else {
			c.note("the alternate is the primary's own path (port %d has LMC 0): alt-after-migration cannot tell a copy from a swap, and a real path failure would take both", c.cfg.Port)
		}
	}
	for port, pi := range c.info.Ports {
		if c.cfg.DeadLID >= pi.LID && uint32(c.cfg.DeadLID) < uint32(pi.LID)+1<<pi.LMC {
			return fmt.Errorf("--dead-lid %d is a LID of %s port %d: pick one no port answers", c.cfg.DeadLID, c.cfg.Device, port)
		}
	}
	c.note("both QPs use timeout %d (%.1f ms per try) and retry_cnt %d (%d tries per path), so a dead path is noticed in %.0f ms",
		c.cfg.Timeout, tryMs(c.cfg.Timeout), c.cfg.RetryCnt, int(c.cfg.RetryCnt)+1, tryMs(c.cfg.Timeout)*float64(int(c.cfg.RetryCnt)+1))
	return nil
}

func tryMs(timeout uint8) float64 { return 4.096e-3 * float64(uint64(1)<<timeout) }

func (c *checker) note(format string, args ...any) {
	c.rep.Notes = append(c.rep.Notes, fmt.Sprintf(format, args...))
}

func (c *checker) add(p Point) { c.rep.Points = append(c.rep.Points, p) }

// step is a part of the check and the points it answers.
type step struct {
	points []string
	run    func(context.Context) error
}

func (c *checker) run(ctx context.Context) error {
	steps := []step{
		{nil, c.setup},
		{[]string{PtArmedModify}, c.armedModify},
		{nil, func(ctx context.Context) error { return c.arm(ctx, "at setup", c.a, c.bq) }},
		{[]string{PtRearmOnArmed}, c.rearmOnArmed},
		{[]string{PtForcedEvent, PtAltAfterMig, PtResponderEv}, c.forced},
		{[]string{PtMigFromRearm}, c.migratedFromRearm},
		{[]string{PtOneWayArm, PtCommEstAfter}, c.oneWay},
		{[]string{PtDeadAlt}, c.deadAlt},
	}
	for i, s := range steps {
		if err := ctx.Err(); err != nil {
			return c.abandon(steps[i:], fmt.Errorf("interrupted: %w", err))
		}
		if err := s.run(ctx); err != nil {
			return c.abandon(steps[i:], err)
		}
	}
	return nil
}

// abandon marks the points of the steps left (and of the one that failed,
// if it did not answer them) as not run.
func (c *checker) abandon(left []step, err error) error {
	for _, s := range left {
		for _, p := range s.points {
			if !slices.ContainsFunc(c.rep.Points, func(x Point) bool { return x.Point == p }) {
				c.add(Point{Point: p, Answer: AnsNotRun, Detail: err.Error()})
			}
		}
	}
	return err
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

// armedModify: PATH_MIG_STATE=ARMED on A, which is MIGRATED (a QP's state
// after INIT) with its alternate loaded.
func (c *checker) armedModify(context.Context) error {
	before, err := c.mig(c.a)
	if err != nil {
		return err
	}
	merr := c.setMig(c.a, event.MigArmed)
	after, err := c.mig(c.a)
	if err != nil {
		return err
	}
	p := Point{Point: PtArmedModify, Answer: decideModify(merr), Errno: errnoName(merr),
		Detail: fmt.Sprintf("A was %s; reads %s after", before, after)}
	if merr == nil && after != event.MigArmed {
		p.Detail += " (accepted, yet not ARMED)"
	}
	c.add(p)
	return nil
}

// rearmOnArmed: REARM on A, ARMED.
func (c *checker) rearmOnArmed(ctx context.Context) error {
	merr := c.setMig(c.a, event.MigRearm)
	after, err := c.mig(c.a)
	if err != nil {
		return err
	}
	c.add(Point{Point: PtRearmOnArmed, Answer: decideModify(merr), Errno: errnoName(merr),
		Detail: fmt.Sprintf("A was ARMED; reads %s after", after)})
	if after != event.MigArmed {
		return c.arm(ctx, "after the REARM on ARMED", c.a)
	}
	return nil
}

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

// migratedFromRearm: A (MIGRATED) gets a new alternate, its old primary's
// path, and REARM; B sends nothing, so A stays REARM; then MIGRATED on it.
func (c *checker) migratedFromRearm(context.Context) error {
	if err := c.loadAlt(c.a, c.prim); err != nil {
		return fmt.Errorf("QP A: loading a new alternate after the migration: %w", err)
	}
	if err := c.setMig(c.a, event.MigRearm); err != nil {
		return fmt.Errorf("REARM on QP A after the migration: %w", err)
	}
	before, err := c.mig(c.a)
	if err != nil {
		return err
	}
	if before != event.MigRearm {
		c.add(Point{Point: PtMigFromRearm, Answer: AnsNotRun,
			Detail: fmt.Sprintf("A reads %s after its REARM, not REARM", before)})
		return nil
	}
	merr := c.setMig(c.a, event.MigMigrated)
	after, err := c.mig(c.a)
	if err != nil {
		return err
	}
	c.add(Point{Point: PtMigFromRearm, Answer: decideModify(merr), Errno: errnoName(merr),
		Detail: fmt.Sprintf("A was REARM; reads %s after", after)})
	return nil
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
