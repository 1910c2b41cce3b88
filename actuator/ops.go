package actuator

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/rdmanl"
	"golang.org/x/sys/unix"
)

// Op is one actuator operation.
type Op string

const (
	OpQuery   Op = "query"
	OpLoadAlt Op = "load-alt"
	OpRearm   Op = "rearm"
	OpMigrate Op = "migrate"
)

// ParseOp checks an operation name.
func ParseOp(s string) (Op, error) {
	switch o := Op(s); o {
	case OpQuery, OpLoadAlt, OpRearm, OpMigrate:
		return o, nil
	}
	return "", fmt.Errorf("unknown operation %q (query, load-alt, rearm, migrate)", s)
}

// AltPath is a new alternate path: the address vector and the alternate
// port, P_Key index and timeout.
type AltPath struct {
	Dest      Dest   `json:"dest"`
	Port      uint8  `json:"port"`
	PKeyIndex uint16 `json:"pkey_index"`
	Timeout   uint8  `json:"timeout"`
}

// Request is one operation on one QP.
type Request struct {
	Op     Op
	PID    int
	QPN    uint32
	Device string   // "" when the QPN is unique on the host
	Alt    *AltPath // load-alt (required), rearm (optional)
	DryRun bool
	// Handle from the probes, when known (HaveHandle).
	Handle     uint32
	HaveHandle bool
	// Start is the owner's start time as judged (Owner.Start, clock ticks
	// after boot); when not 0, a process with another one under the same
	// pid is refused.
	Start uint64
	// Row, when set, is the rdma netlink row of the QP its caller read
	// just before (Owner.Row): the operation starts from it instead of
	// reading it again. The check before any change reads netlink anew.
	Row *rdmanl.QP
}

// Command is one MODIFY_QP the actuator sends (or would send).
type Command struct {
	What     string `json:"what"` // "alt_path", "rearm", "migrate"
	AttrMask uint32 `json:"attr_mask"`
	Body     string `json:"body_hex"`  // struct ib_uverbs_modify_qp, 112 bytes
	Ioctl    string `json:"ioctl_hex"` // struct ib_uverbs_ioctl_hdr + attributes, pointers as 0
	DriverID uint32 `json:"driver_id"`
	Sent     bool   `json:"sent"`
	Errno    string `json:"errno,omitempty"`
}

// Result is what an operation did.
type Result struct {
	Op       Op            `json:"op"`
	Target   Target        `json:"target"`
	DryRun   bool          `json:"dry_run"`
	Before   *Attr         `json:"before,omitempty"`
	After    *Attr         `json:"after,omitempty"`
	Commands []Command     `json:"commands,omitempty"`
	Changes  []string      `json:"changes,omitempty"`
	Note     string        `json:"note,omitempty"`
	Took     time.Duration `json:"took_ns"`
}

// LogEntry is one logged step of an operation.
type LogEntry struct {
	Time   time.Time `json:"time"`
	Op     Op        `json:"op"`
	PID    int       `json:"pid"`
	Device string    `json:"device,omitempty"`
	QPN    uint32    `json:"qpn"`
	Handle uint32    `json:"handle"`
	Step   string    `json:"step"` // resolve, check, send, verify, dry-run, error
	Detail string    `json:"detail"`
}

// Actuator runs operations on QPs of other processes.
type Actuator struct {
	// Rows reads the rdma netlink QP table (rdmanl.Read by default).
	Rows func() ([]rdmanl.QP, error)
	// Find reads the rdma netlink rows of one QP number on one device
	// ("": on every device), an rdmanl.Finder's by default: a get of that
	// QP over a socket kept open, not a dump of every table. nil: Rows,
	// filtered.
	Find func(device string, qpn uint32) ([]rdmanl.QP, error)
	// Log receives every step (nil: not logged).
	Log func(LogEntry)
	// Now is the clock (time.Now by default).
	Now func() time.Time
	// BeforeSend, when set, runs after the checks and before the first
	// MODIFY_QP: a seam for tests that make the owner race the actuator.
	BeforeSend func(Target)
	roots      roots
}

// New returns an actuator on the real system.
func New(log func(LogEntry)) *Actuator {
	return &Actuator{
		Rows: func() ([]rdmanl.QP, error) {
			s, err := rdmanl.Read()
			return s.QPs, err
		},
		Find: new(rdmanl.Finder).Find,
		Log:  log, Now: time.Now, roots: sysRoots,
	}
}

// find reads the rows of QP qpn on device ("": on every device).
func (a *Actuator) find(device string, qpn uint32) ([]rdmanl.QP, error) {
	if a.Find != nil {
		return a.Find(device, qpn)
	}
	rows, err := a.Rows()
	if err != nil {
		return nil, err
	}
	var out []rdmanl.QP
	for _, r := range rows {
		if r.LQPN == qpn && (device == "" || r.Device == device) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (a *Actuator) log(r *Request, t *Target, step, format string, args ...any) {
	if a.Log == nil {
		return
	}
	e := LogEntry{Time: a.Now(), Op: r.Op, PID: r.PID, Device: r.Device, QPN: r.QPN, Step: step, Detail: fmt.Sprintf(format, args...)}
	if t != nil && t.Device != "" {
		e.Device, e.Handle = t.Device, t.Handle
	}
	a.Log(e)
}

// Do runs one operation: resolve, check, act, verify. The error (one
// lowercase line, wrapping an Err* class) comes with the partial result.
func (a *Actuator) Do(ctx context.Context, r Request) (*Result, error) {
	start := a.Now()
	res := &Result{Op: r.Op, DryRun: r.DryRun}
	err := a.do(ctx, &r, res)
	res.Took = a.Now().Sub(start)
	if err != nil {
		a.log(&r, &res.Target, "error", "%v", err)
	}
	return res, err
}

func (a *Actuator) do(ctx context.Context, r *Request, res *Result) error {
	if (r.Op == OpLoadAlt) && r.Alt == nil {
		return errors.New("load-alt needs an alternate path (--alt-port and --alt-dlid or --alt-dgid)")
	}
	var (
		rows []rdmanl.QP
		err  error
	)
	if r.Row != nil && r.Row.LQPN == r.QPN && r.Row.Device == r.Device && r.Device != "" {
		rows = []rdmanl.QP{*r.Row}
	} else if rows, err = a.find(r.Device, r.QPN); err != nil {
		return fmt.Errorf("reading rdma netlink: %w", err)
	}
	row, err := findRow(rows, r.PID, r.Device, r.QPN)
	res.Target = Target{PID: r.PID, Device: row.Device, QPN: r.QPN, Comm: row.Comm}
	if err != nil {
		return err
	}
	b, t, err := a.roots.resolve(r.PID, row, r.Handle, r.HaveHandle, r.Start)
	res.Target = t
	if err != nil {
		return err
	}
	defer b.Close()
	a.log(r, &t, "resolve", "%s fd %d handle %d (%s), driver id %d", t.File.Uverbs, t.File.FD, t.Handle, t.How, b.DriverID)
	if err := ctx.Err(); err != nil {
		return err
	}
	return a.act(r, b, &t, res)
}

// Open resolves a QP and returns the owner's file borrowed (close it) with
// the target, for callers that run many commands (benchmarks, tools).
func (a *Actuator) Open(pid int, device string, qpn uint32) (*Borrowed, Target, error) {
	rows, err := a.find(device, qpn)
	if err != nil {
		return nil, Target{}, fmt.Errorf("reading rdma netlink: %w", err)
	}
	row, err := findRow(rows, pid, device, qpn)
	if err != nil {
		return nil, Target{}, err
	}
	return a.roots.resolve(pid, row, 0, false, 0)
}

// act checks, sends and verifies.
func (a *Actuator) act(r *Request, b *Borrowed, t *Target, res *Result) error {
	before, err := a.query(b, t)
	if err != nil {
		return err
	}
	res.Before = &before
	mig := event.MigState(before.PathMigState)
	if d := sameQP(before, t.Row); d != "" {
		return fmt.Errorf("%w: handle %d of pid %d does not name qp %d: %s (handle ids are reused)", ErrGone, t.Handle, t.PID, t.QPN, d)
	}
	row, err := a.confirm(t, before, "before")
	if err != nil {
		return err
	}
	if row.HasPathMig && row.PathMig != mig {
		return fmt.Errorf("%w: qp %d changed while it was checked (rdma netlink reads %s, the handle %s): nothing sent", ErrWrongState, t.QPN, row.PathMig, mig)
	}
	a.log(r, t, "check", "state %s, mig %s, alt port %d; rdma netlink agrees (owner pid %d, remote qpn %d)", event.QPState(before.State), mig, before.AltPortNum, row.PID, row.RQPN)
	if r.Op == OpQuery {
		return nil
	}
	if event.QPState(before.State) != event.StateRTS {
		return fmt.Errorf("%w: qp %d is %s, %s needs RTS", ErrWrongState, t.QPN, event.QPState(before.State), r.Op)
	}
	if r.Alt != nil && (r.Op == OpLoadAlt || r.Op == OpRearm) {
		if err := checkPathBitsField(r.Alt.Dest.SrcPathBits); err != nil {
			return fmt.Errorf("%w: %v: nothing sent", ErrBadAlt, err)
		}
		if _, err := a.roots.checkLMC(t.Device, r.Alt.Port, r.Alt.Dest.SrcPathBits); err != nil {
			return fmt.Errorf("%w: %v: nothing sent", ErrBadAlt, err)
		}
	}
	var cmds []Modify
	switch r.Op {
	case OpLoadAlt:
		if mig != event.MigArmed && mig != event.MigMigrated {
			return fmt.Errorf("%w: qp %d is %s, load-alt needs ARMED or MIGRATED", ErrWrongState, t.QPN, mig)
		}
		cmds = append(cmds, altModify(t.Handle, r.Alt))
	case OpRearm:
		if mig != event.MigMigrated {
			return fmt.Errorf("%w: qp %d is %s, rearm needs MIGRATED", ErrWrongState, t.QPN, mig)
		}
		if r.Alt != nil {
			cmds = append(cmds, altModify(t.Handle, r.Alt))
		}
		cmds = append(cmds, Modify{Handle: t.Handle, AttrMask: event.AttrPathMigState, PathMigState: uint8(event.MigRearm)})
	case OpMigrate:
		if mig != event.MigArmed {
			return fmt.Errorf("%w: qp %d is %s, migrate needs ARMED (an armed alternate to move to)", ErrWrongState, t.QPN, mig)
		}
		cmds = append(cmds, Modify{Handle: t.Handle, AttrMask: event.AttrPathMigState, PathMigState: uint8(event.MigMigrated)})
	}
	if a.BeforeSend != nil && !r.DryRun {
		a.BeforeSend(*t)
	}
	for i := range cmds {
		m := &cmds[i]
		c := describe(m, b.DriverID)
		if r.DryRun {
			if m.AttrMask&event.AttrAltPath != 0 && a.roots.linkLayer(t.Device, m.AltPortNum) == "Ethernet" {
				res.Note = "the kernel will refuse the alternate path: port is RoCE, APM is InfiniBand-only"
			}
			a.log(r, t, "dry-run", "would send MODIFY_QP %s mask %#x body %s", c.What, c.AttrMask, c.Body)
			res.Commands = append(res.Commands, c)
			continue
		}
		a.log(r, t, "send", "MODIFY_QP %s mask %#x", c.What, c.AttrMask)
		err := b.Modify(m)
		c.Sent = true
		if err != nil {
			c.Errno = unix.ErrnoName(errnoOf(err))
		}
		res.Commands = append(res.Commands, c)
		if err != nil {
			return a.modifyError(b, t, m, c.What, err)
		}
	}
	if r.DryRun {
		return nil
	}
	after, err := a.query(b, t)
	if err != nil {
		return fmt.Errorf("verifying: %w", err)
	}
	res.After = &after
	res.Changes = Diff(before, after)
	row, err = a.confirm(t, after, "after")
	if err != nil {
		return fmt.Errorf("verifying: %w", err)
	}
	a.log(r, t, "verify", "mig %s -> %s; %d fields changed; rdma netlink reads qp %d as %s", mig, event.MigState(after.PathMigState), len(res.Changes), t.QPN, row.PathMig)
	if err := verify(r, t, after); err != nil {
		return err
	}
	return verifyNetlink(r, t, row)
}

// verify checks that the QP reads as the operation meant.
func verify(r *Request, t *Target, after Attr) error {
	mig := event.MigState(after.PathMigState)
	switch r.Op {
	case OpRearm:
		if mig != event.MigRearm && mig != event.MigArmed {
			return fmt.Errorf("%w: qp %d reads %s after rearm (the owner may have raced)", ErrWrongState, t.QPN, mig)
		}
	case OpMigrate:
		if mig != event.MigMigrated {
			return fmt.Errorf("%w: qp %d reads %s after migrate", ErrWrongState, t.QPN, mig)
		}
	}
	if r.Alt != nil && r.Op != OpMigrate && (after.AltPortNum != r.Alt.Port || after.AltDest.DLID != r.Alt.Dest.DLID) {
		return fmt.Errorf("%w: qp %d reads alternate port %d dlid %d, loaded port %d dlid %d", ErrWrongState, t.QPN, after.AltPortNum, after.AltDest.DLID, r.Alt.Port, r.Alt.Dest.DLID)
	}
	return nil
}

func altModify(h uint32, p *AltPath) Modify {
	d := p.Dest
	d.PortNum = p.Port // the kernel wants alt_port_num == alt_dest.port_num
	return Modify{Handle: h, AttrMask: event.AttrAltPath, AltDest: d, AltPortNum: p.Port, AltPKeyIndex: p.PKeyIndex, AltTimeout: p.Timeout}
}

func describe(m *Modify, driverID uint32) Command {
	what := "rearm"
	switch {
	case m.AttrMask&event.AttrAltPath != 0:
		what = "alt_path"
	case m.AttrMask&event.AttrPathMigState != 0 && m.PathMigState == uint8(event.MigMigrated):
		what = "migrate"
	}
	body := m.Marshal()
	hdr := encodeIoctl(objectDevice, methodInvokeWrit, driverID, invokeWriteAttrs(cmdModifyQP, 0, len(body), 0, 0))
	return Command{What: what, AttrMask: m.AttrMask, Body: hex.EncodeToString(body), Ioctl: hex.EncodeToString(hdr), DriverID: driverID}
}

// query runs QUERY_QP and classifies the error.
func (a *Actuator) query(b *Borrowed, t *Target) (Attr, error) {
	at, err := b.Query(t.Handle)
	if err == nil {
		return at, nil
	}
	return Attr{}, a.handleError(t, "query", err)
}

func (a *Actuator) handleError(t *Target, what string, err error) error {
	switch {
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: qp %d (handle %d of pid %d) no longer exists: %s answered %v", ErrGone, t.QPN, t.Handle, t.PID, what, err)
	case errors.Is(err, unix.EIO):
		return fmt.Errorf("%w: %s was removed (%s answered %v)", ErrGone, t.Device, what, err)
	}
	return fmt.Errorf("%s qp %d: %w", what, t.QPN, err)
}

// modifyError explains a refused MODIFY_QP: a QP gone (a query fails too),
// an alternate path on a RoCE port, or another refusal.
func (a *Actuator) modifyError(b *Borrowed, t *Target, m *Modify, what string, err error) error {
	if !errors.Is(err, unix.EINVAL) {
		return a.handleError(t, "modify ("+what+")", err)
	}
	now, qerr := b.Query(t.Handle)
	if qerr != nil {
		return a.handleError(t, "modify ("+what+")", err)
	}
	if m.AttrMask&event.AttrAltPath != 0 {
		ll := a.roots.linkLayer(t.Device, m.AltPortNum)
		if ll == "" {
			ll = a.roots.linkLayer(t.Device, now.PortNum)
		}
		if ll == "Ethernet" {
			return fmt.Errorf("%w: %s port %d refused the alternate path (EINVAL): nothing changed", ErrRoCE, t.Device, m.AltPortNum)
		}
	}
	return fmt.Errorf("%w: modify (%s) of qp %d refused with %v (qp is %s, mig %s)", ErrRefused, what, t.QPN, err, event.QPState(now.State), event.MigState(now.PathMigState))
}

func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// Diff lists the fields that differ, as "name: old -> new".
func Diff(a, b Attr) []string {
	var out []string
	add := func(name string, x, y any) {
		if fmt.Sprint(x) != fmt.Sprint(y) {
			out = append(out, fmt.Sprintf("%s: %v -> %v", name, x, y))
		}
	}
	add("qp_state", event.QPState(a.State), event.QPState(b.State))
	add("path_mig_state", event.MigState(a.PathMigState), event.MigState(b.PathMigState))
	add("alt_port_num", a.AltPortNum, b.AltPortNum)
	add("alt_timeout", a.AltTimeout, b.AltTimeout)
	add("alt_pkey_index", a.AltPKeyIndex, b.AltPKeyIndex)
	add("alt_dest", FormatDest(a.AltDest), FormatDest(b.AltDest))
	add("dest", FormatDest(a.Dest), FormatDest(b.Dest))
	add("port_num", a.PortNum, b.PortNum)
	add("dest_qp_num", a.DestQPN, b.DestQPN)
	return out
}

// FormatDest prints an address vector in one word-ish line.
func FormatDest(d Dest) string {
	s := fmt.Sprintf("port %d dlid %d sl %d", d.PortNum, d.DLID, d.SL)
	if d.SrcPathBits != 0 {
		s += fmt.Sprintf(" path bits %d", d.SrcPathBits)
	}
	if d.IsGlobal {
		s += fmt.Sprintf(" dgid %s sgid_index %d hop %d", gidString(d.DGID), d.SGIDIndex, d.HopLimit)
	}
	return s
}
