package actuator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/boottime"
)

// Finding kinds the enforcer emits (audit counts findings by kind, so each
// has its counter in the metrics).
const (
	KindActuated       = apm.Actuated     // the QP was rearmed and verified
	KindWouldActuate   = apm.WouldActuate // monitor mode: what enforce would have sent
	KindActuationSkip  = apm.ActuationSkipped
	KindActuationError = apm.ActuationFailed
)

// EnforcerStats counts what the enforcer did. Dropped counts the pending
// actions given up without a finding: their QP generation ended, the owner
// rearmed during the grace period, or (DroppedLost, counted in Dropped
// too) the event stream lost records since their migration. Deferred
// counts the times an action was sent to wait for its turn in the rate
// limit.
type EnforcerStats struct {
	Actuated, WouldActuate, Skipped, Failed, Dropped, DroppedLost, Deferred uint64
}

// Enforcer is the audit daemon's actor (audit.Actor): on a missed-rearm
// finding, after the grace period, it rearms the QP through the owner's
// borrowed file under a Policy, verifies, and reports an "actuated"
// finding. It acts only on the QP generation the finding judged. Its
// methods are called from one goroutine (the audit loop); with Background
// its actions run on goroutines of their own meanwhile.
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
	// LinkLayer reads a port's link layer ("InfiniBand", "Ethernet"; ""
	// unknown). nil: not read (every alternate is tried).
	LinkLayer func(device string, port uint8) string
	// Owner finds a QP's owner in rdma netlink and /proc: a finding's pid
	// and comm are whoever last touched the QP (a kernel module, another
	// tool), so the allowlist and the actuator use the owner instead.
	Owner func(device string, qpn uint32) (Owner, error)
	// Log, when set, receives what produces no finding (a pending action
	// dropped), slog style.
	Log func(msg string, args ...any)
	// Parallel bounds the actions run side by side (a port failure
	// migrates every QP through it, and each action is mostly waiting on
	// the kernel); 0: DefaultParallel.
	Parallel int
	// Background runs the actions off the caller's goroutine: Act and
	// Tick start them and return, Done is readable once some finished and
	// Collect returns their findings (audit.Background). Otherwise Act and
	// Tick return once their actions finished, with the findings.
	Background bool

	// mu guards what follows while actions run; an action lets it go only
	// around Owner and Do.
	mu       sync.Mutex
	handles  *Handles
	qps      map[event.QPKey]*qpTrack
	pending  []pendingAct // waiting out their grace
	queue    []pendingAct // waiting for their turn in the rate limit (queue.go)
	seq      uint64
	inflight map[event.QPKey]bool   // QPs with an action running
	held     map[event.QPKey]string // of those, admitted by the limit and not past it yet: owner or ""
	turn     *sync.Cond             // an action passed the limit (queue.go)
	recent   []rateMark
	served   map[uint32]time.Time // by the finding's pid: when its last action was admitted (fairturn.go)
	lostAt   uint64               // boot ns by which the last records lost happened (loss.go)
	stats    EnforcerStats
	slots    chan struct{} // one per action running
	running  sync.WaitGroup
	done     []apm.Finding // background findings not collected yet
	doneC    chan struct{}
}

// NewEnforcer returns an enforcer acting through a, its actions in the
// background (audit's actor).
func NewEnforcer(p Policy, a *Actuator) *Enforcer {
	e := &Enforcer{Policy: p, Background: true, Do: a.Do, Boot: boottime.Now, Now: time.Now, PortState: a.roots.portState, LinkLayer: a.roots.linkLayer}
	e.Owner = a.roots.netlinkOwner(a, func() Allow { return e.Policy.Allow })
	return e
}

// Stats returns the counters.
func (e *Enforcer) Stats() EnforcerStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
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

// run decides and, in enforce mode, acts on one missed-rearm, right after
// checking that the generation it judged is still the one alive. ok false:
// the action was dropped, or deferred by the rate limit, without a finding.
// Called with e.mu held.
func (e *Enforcer) run(ctx context.Context, p *pendingAct) (apm.Finding, bool) {
	src := p.f
	key := event.QPKey{Device: p.key.Device, QPN: p.key.QPN}
	if e.gone(p) {
		return apm.Finding{}, false
	}
	t := e.qps[key]
	var (
		own Owner
		err error
	)
	e.unlocked(func() { own, err = e.Owner(key.Device, key.QPN) })
	if err != nil {
		return e.skip(src, err.Error())
	}
	if own.Kernel {
		return e.skip(src, fmt.Sprintf("kernel ulp qp (%s): cannot be changed from userspace, not trying", own.Comm))
	}
	if t.owner != 0 && own.PID != t.owner {
		e.dropped(*p, fmt.Sprintf("the qp number now belongs to pid %d, not %d", own.PID, t.owner))
		return apm.Finding{}, false
	}
	src.PID, src.Comm = own.PID, own.Comm
	if ok, why := e.Policy.allows(key.Device, own); !ok {
		return e.skip(src, why)
	}
	if t.acted {
		return e.skip(src, "already actuated since its last migration (never twice in a row)")
	}
	e.inTurn(p)
	if e.gone(p) { // while the owner was looked up
		return apm.Finding{}, false
	}
	if e.qps[key] != t {
		e.dropped(*p, "the qp was destroyed while its owner was looked up")
		return apm.Finding{}, false
	}
	now := e.Now()
	delete(e.held, key) // its own place is not someone else's
	why, next, _ := e.limiter(now).check(own.id())
	e.passedTurn(p)
	if why != "" {
		e.requeue(*p, own.id(), next, why)
		return apm.Finding{}, false
	}
	alt, altFrom := e.pickAlternate(key.Device, t)
	note := ""
	if alt != nil && e.roce(key.Device, alt.Port) {
		// ib_core refuses IB_QP_ALT_PATH on a RoCE port: not sent, so the
		// rearm is not one refused command later.
		if !e.Policy.RearmWithoutAlternate {
			return e.skip(src, fmt.Sprintf("the new alternate (%s) is on RoCE port %d, where the kernel refuses alternate paths (APM is InfiniBand-only), and the policy does not allow a rearm without one", altFrom, alt.Port))
		}
		note = fmt.Sprintf("the new alternate (%s) is not sent: port %d is RoCE, where the kernel refuses alternate paths (APM is InfiniBand-only); the rearm goes without a new alternate, as the policy allows: the QP is armed onto the alternate it already holds", altFrom, alt.Port)
		alt = nil
	}
	if alt == nil && !e.Policy.RearmWithoutAlternate {
		return e.skip(src, "no new alternate path ("+altFrom+") and the policy does not allow a rearm without one")
	}
	req := Request{Op: OpRearm, PID: int(own.PID), QPN: key.QPN, Device: key.Device, Alt: alt, Start: own.Start}
	if own.Row.LQPN == key.QPN && own.Row.Device == key.Device {
		req.Row = &own.Row
	}
	req.Handle, req.HaveHandle = e.handles.Lookup(key.Device, key.QPN)
	if e.Policy.Mode != ModeEnforce {
		req.DryRun = true
		var res *Result
		e.unlocked(func() { res, err = e.Do(ctx, req) })
		e.stats.WouldActuate++
		expl := fmt.Sprintf("monitor mode: would rearm (alternate: %s)", altFrom)
		if note != "" {
			expl += "; " + note
		}
		if err != nil {
			expl += fmt.Sprintf("; the checks say: %v", err)
		}
		f := e.finding(src, KindWouldActuate, apm.SevInfo, expl)
		f.Evidence = append(f.Evidence, resultEvidence(res)...)
		return f, true
	}
	e.recent = append(e.recent, rateMark{at: now, owner: own.id()})
	var res *Result
	e.unlocked(func() { res, err = e.Do(ctx, req) })
	if err != nil && alt != nil && (errors.Is(err, ErrRoCE) || errors.Is(err, ErrRefused) || errors.Is(err, ErrBadAlt)) && e.Policy.RearmWithoutAlternate {
		note = fmt.Sprintf("the new alternate (%s) was refused (%v); rearmed without a new alternate as the policy allows: the QP is armed onto the alternate it already holds", altFrom, err)
		req.Alt = nil
		e.unlocked(func() { res, err = e.Do(ctx, req) })
	}
	if err != nil && nothingSent(res) {
		if why := notNeeded(err, res); why != "" {
			return e.skip(src, why)
		}
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

// nothingSent reports whether no MODIFY_QP reached the kernel.
func nothingSent(res *Result) bool {
	if res == nil {
		return true
	}
	for _, c := range res.Commands {
		if c.Sent {
			return false
		}
	}
	return true
}

// notNeeded says why an operation that sent nothing was not a failure: the
// QP was already rearmed (by its owner, after the last events the enforcer
// saw), or the judged QP is gone. "" otherwise.
func notNeeded(err error, res *Result) string {
	switch {
	case errors.Is(err, ErrWrongState) && res != nil && res.Before != nil &&
		(event.MigState(res.Before.PathMigState) == event.MigRearm || event.MigState(res.Before.PathMigState) == event.MigArmed):
		return fmt.Sprintf("the qp reads %s already: rearmed by its owner meanwhile, nothing sent", event.MigState(res.Before.PathMigState))
	case errors.Is(err, ErrGone), errors.Is(err, ErrNoProcess):
		return "the judged qp is gone, nothing sent: " + err.Error()
	}
	return ""
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
		Dest: Dest{DLID: p.DLID, SrcPathBits: p.SrcPathBits, PortNum: uint8(p.Port), IsGlobal: p.IsGlobal, DGID: p.DGID, SGIDIndex: p.SGIDIndex, HopLimit: 64}}
	return a, "previous primary " + FormatDest(a.Dest)
}

// roce reports whether a device's port is RoCE (Ethernet link layer).
func (e *Enforcer) roce(device string, port uint8) bool {
	return e.LinkLayer != nil && e.LinkLayer(device, port) == "Ethernet"
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
	return fmt.Sprintf("state %s mig %s port %d path %s alt_port %d alternate %s", event.QPState(a.State), event.MigState(a.PathMigState),
		a.PortNum, FormatDest(a.Dest), a.AltPortNum, FormatDest(a.AltDest))
}
