package actuator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"golang.org/x/sys/unix"
)

// Finding kinds the enforcer emits (audit counts findings by kind, so each
// has its counter in the metrics).
const (
	KindActuated       = apm.Actuated     // the QP was rearmed and verified
	KindWouldActuate   = apm.WouldActuate // monitor mode: what enforce would have sent
	KindActuationSkip  = apm.ActuationSkipped
	KindActuationError = apm.ActuationFailed
)

// EnforcerStats counts what the enforcer did.
type EnforcerStats struct {
	Actuated, WouldActuate, Skipped, Failed uint64
}

// Enforcer is the audit daemon's actor (audit.Actor): on a missed-rearm
// finding, after the grace period, it rearms the QP through the owner's
// borrowed file under a Policy, verifies, and reports an "actuated"
// finding. It is called from one goroutine (the audit loop).
type Enforcer struct {
	Policy Policy
	// Do runs an operation (Actuator.Do).
	Do func(context.Context, Request) (*Result, error)
	// Boot reads CLOCK_BOOTTIME in nanoseconds (the events' clock).
	Boot func() uint64
	// Now is the wall clock.
	Now func() time.Time
	// PortState reads a port's state ("ACTIVE", ...).
	PortState func(device string, port uint8) string
	// Owner finds a QP's owner in rdma netlink: a finding's pid and comm
	// are whoever last touched the QP (a kernel module, another tool), so
	// the allowlist and the actuator use the owner instead.
	Owner func(device string, qpn uint32) (Owner, error)

	handles *Handles
	qps     map[event.QPKey]*qpTrack
	pending []pendingAct
	recent  []time.Time
	stats   EnforcerStats
}

// Owner is a QP's owner as rdma netlink reports it.
type Owner struct {
	PID    uint32
	Comm   string
	Kernel bool
}

// netlinkOwner reads the owner from the actuator's netlink rows.
func netlinkOwner(a *Actuator) func(string, uint32) (Owner, error) {
	return func(device string, qpn uint32) (Owner, error) {
		rows, err := a.Rows()
		if err != nil {
			return Owner{}, fmt.Errorf("reading rdma netlink: %w", err)
		}
		for _, r := range rows {
			if r.Device == device && r.LQPN == qpn {
				return Owner{PID: r.PID, Comm: r.Comm, Kernel: r.Kernel}, nil
			}
		}
		return Owner{}, fmt.Errorf("%w: no qp %d on %s in rdma netlink", ErrNotFound, qpn, device)
	}
}

type qpTrack struct {
	primary, alt, prev *event.Path
	acted              bool   // actuated since its last migration
	migratedAt         uint64 // boot ns of the last PATH_MIG
}

type pendingAct struct {
	f   apm.Finding
	due time.Time
}

// NewEnforcer returns an enforcer acting through a.
func NewEnforcer(p Policy, a *Actuator) *Enforcer {
	return &Enforcer{Policy: p, Do: a.Do, Boot: bootNow, Now: time.Now, PortState: a.roots.portState, Owner: netlinkOwner(a)}
}

func bootNow() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// Stats returns the counters.
func (e *Enforcer) Stats() EnforcerStats { return e.stats }

func (e *Enforcer) track(k event.QPKey) *qpTrack {
	if e.qps == nil {
		e.qps = map[event.QPKey]*qpTrack{}
		e.handles = NewHandles()
	}
	t := e.qps[k]
	if t == nil {
		t = &qpTrack{}
		e.qps[k] = t
	}
	return t
}

// Observe follows the paths and migrations of every QP and the handles of
// user QPs. No I/O.
func (e *Enforcer) Observe(ev *event.Event) {
	if ev.QPN == 0 {
		return
	}
	t := e.track(ev.Key())
	e.handles.Observe(ev)
	switch {
	case ev.Kind == event.KindModify && ev.Modify != nil && ev.Modify.Ret == 0:
		if p := ev.Modify.Primary; p != nil {
			c := *p
			t.primary = &c
		}
		if p := ev.Modify.Alt; p != nil {
			c := *p
			t.alt = &c
		}
	case ev.Kind == event.KindQPEvent && ev.QP != nil && ev.QP.Type == event.EvPathMig:
		t.prev, t.primary, t.alt = t.primary, t.alt, nil
		t.acted, t.migratedAt = false, ev.Boot
	case ev.Kind == event.KindQPDestroy:
		delete(e.qps, ev.Key())
	}
}

// Act takes a new finding: a missed-rearm is scheduled after the grace
// period (acted on at once when the grace is zero).
func (e *Enforcer) Act(ctx context.Context, f apm.Finding) []apm.Finding {
	if f.Kind != apm.MissedRearm || f.Resolved {
		return nil
	}
	e.pending = append(e.pending, pendingAct{f: f, due: e.Now().Add(time.Duration(e.Policy.Grace))})
	return e.Tick(ctx, e.Now())
}

// Tick runs the scheduled actions that are due.
func (e *Enforcer) Tick(ctx context.Context, now time.Time) []apm.Finding {
	var out []apm.Finding
	keep := e.pending[:0]
	for _, p := range e.pending {
		if now.Before(p.due) {
			keep = append(keep, p)
			continue
		}
		if f, ok := e.run(ctx, p.f); ok {
			out = append(out, f)
		}
	}
	e.pending = keep
	return out
}

func (e *Enforcer) finding(src apm.Finding, kind apm.Kind, sev apm.Severity, expl string) apm.Finding {
	return apm.Finding{Kind: kind, Severity: sev, QP: src.QP, PID: src.PID, Comm: src.Comm,
		First: src.First, Last: e.Boot(), LastTime: e.Now(), Explanation: expl,
		Evidence: []apm.Evidence{{Boot: src.Last, What: fmt.Sprintf("finding %d (%s)", src.ID, src.Kind)}}}
}

func (e *Enforcer) skip(src apm.Finding, why string) (apm.Finding, bool) {
	e.stats.Skipped++
	f := e.finding(src, KindActuationSkip, apm.SevInfo, "not actuated: "+why)
	return f, true
}

// run decides and, in enforce mode, acts on one missed-rearm.
func (e *Enforcer) run(ctx context.Context, src apm.Finding) (apm.Finding, bool) {
	key := event.QPKey{Device: src.QP.Device, QPN: src.QP.QPN}
	t := e.track(key)
	own, err := e.Owner(key.Device, key.QPN)
	if err != nil {
		return e.skip(src, err.Error())
	}
	if own.Kernel {
		return e.skip(src, fmt.Sprintf("kernel ulp qp (%s): cannot be changed from userspace, not trying", own.Comm))
	}
	src.PID, src.Comm = own.PID, own.Comm
	if ok, why := e.Policy.allows(key.Device, own.Comm, own.PID); !ok {
		return e.skip(src, why)
	}
	if t.acted {
		return e.skip(src, "already actuated since its last migration (never twice in a row)")
	}
	now := e.Now()
	per := time.Duration(e.Policy.RateLimit.Per)
	recent := e.recent[:0]
	for _, at := range e.recent {
		if now.Sub(at) < per {
			recent = append(recent, at)
		}
	}
	e.recent = recent
	if len(e.recent) >= e.Policy.RateLimit.Max {
		return e.skip(src, fmt.Sprintf("rate limit: %d actions in %v", len(e.recent), per))
	}
	alt, altFrom := e.pickAlternate(key.Device, t)
	if alt == nil && !e.Policy.RearmWithoutAlternate {
		return e.skip(src, "no new alternate path ("+altFrom+") and the policy does not allow a rearm without one")
	}
	req := Request{Op: OpRearm, PID: int(src.PID), QPN: key.QPN, Device: key.Device, Alt: alt}
	req.Handle, req.HaveHandle = e.handles.Lookup(key.Device, key.QPN)
	if e.Policy.Mode != ModeEnforce {
		req.DryRun = true
		res, err := e.Do(ctx, req)
		e.stats.WouldActuate++
		expl := fmt.Sprintf("monitor mode: would rearm (alternate: %s)", altFrom)
		if err != nil {
			expl += fmt.Sprintf("; the checks say: %v", err)
		}
		f := e.finding(src, KindWouldActuate, apm.SevInfo, expl)
		f.Evidence = append(f.Evidence, resultEvidence(res)...)
		return f, true
	}
	e.recent = append(e.recent, now)
	res, err := e.Do(ctx, req)
	note := ""
	if err != nil && alt != nil && (errors.Is(err, ErrRoCE) || errors.Is(err, ErrRefused)) && e.Policy.RearmWithoutAlternate {
		note = fmt.Sprintf("the new alternate (%s) was refused (%v); rearmed without a new alternate as the policy allows: the QP is armed onto the alternate it already holds", altFrom, err)
		req.Alt = nil
		res, err = e.Do(ctx, req)
	}
	if err != nil {
		e.stats.Failed++
		f := e.finding(src, KindActuationError, apm.SevWarning, "rearm failed: "+err.Error())
		f.Evidence = append(f.Evidence, resultEvidence(res)...)
		return f, true
	}
	t.acted = true
	e.stats.Actuated++
	expl := fmt.Sprintf("rearmed through the owner's uverbs file (handle %d, %s)", res.Target.Handle, res.Target.How)
	if req.Alt != nil {
		expl += ", new alternate: " + altFrom
	}
	if note != "" {
		expl += "; " + note
	}
	f := e.finding(src, KindActuated, apm.SevInfo, expl)
	f.Evidence = append(f.Evidence, resultEvidence(res)...)
	mig := t.migratedAt
	if mig == 0 {
		mig = src.First
	}
	if mig != 0 && f.Last > mig {
		f.Unprotected = time.Duration(f.Last - mig)
	}
	return f, true
}

// pickAlternate chooses the new alternate: the configured table, else the
// previous primary when its port is ACTIVE again (and the policy allows).
func (e *Enforcer) pickAlternate(device string, t *qpTrack) (*AltPath, string) {
	var port uint8
	if t.primary != nil {
		port = uint8(t.primary.Port)
	}
	if a, ok := e.Policy.alternate(device, port); ok {
		return a, fmt.Sprintf("configured %s", FormatDest(a.Dest))
	}
	if !e.Policy.PreviousPrimary {
		return nil, "none configured"
	}
	if t.prev == nil {
		return nil, "previous primary unknown"
	}
	p := t.prev
	if st := e.PortState(device, uint8(p.Port)); st != "ACTIVE" {
		return nil, fmt.Sprintf("previous primary's port %d is %s", p.Port, orUnknown(st))
	}
	a := &AltPath{Port: uint8(p.Port), PKeyIndex: p.PKeyIndex, Timeout: 14,
		Dest: Dest{DLID: p.DLID, PortNum: uint8(p.Port), IsGlobal: p.IsGlobal, DGID: p.DGID, SGIDIndex: p.SGIDIndex, HopLimit: 64}}
	return a, "previous primary " + FormatDest(a.Dest)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func resultEvidence(res *Result) []apm.Evidence {
	if res == nil {
		return nil
	}
	var ev []apm.Evidence
	if res.Before != nil {
		ev = append(ev, apm.Evidence{What: "before: " + attrLine(res.Before)})
	}
	for _, c := range res.Commands {
		s := fmt.Sprintf("MODIFY_QP %s mask %#x body %s", c.What, c.AttrMask, c.Body)
		if !c.Sent {
			s = "would send " + s
		}
		if c.Errno != "" {
			s += " refused " + c.Errno
		}
		ev = append(ev, apm.Evidence{What: s})
	}
	if res.After != nil {
		ev = append(ev, apm.Evidence{What: "after: " + attrLine(res.After)})
		if len(res.Changes) > 0 {
			ev = append(ev, apm.Evidence{What: "changed: " + strings.Join(res.Changes, "; ")})
		}
	}
	return ev
}

func attrLine(a *Attr) string {
	return fmt.Sprintf("state %s mig %s alt_port %d alternate %s", event.QPState(a.State), event.MigState(a.PathMigState), a.AltPortNum, FormatDest(a.AltDest))
}
