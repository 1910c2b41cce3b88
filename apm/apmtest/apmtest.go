// Package apmtest builds synthetic APM event streams for tests: a QP's life
// told as the verbs calls, async events and CM messages that a source would
// decode. Other packages' tests reuse it.
package apmtest

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
)

// Paths used by the tests: two ports of one HCA towards two LIDs of the
// peer, and a third route.
var (
	PathA = event.Path{Port: 1, DLID: 0x11}
	PathB = event.Path{Port: 2, DLID: 0x22}
	PathC = event.Path{Port: 1, DLID: 0x33}
)

// Step is one input: an event, a ground-truth reading among them
// (event.KindTruth), as every source hands them to the model.
type Step struct {
	Ev *event.Event
}

// Boot is the step's time stamp.
func (s Step) Boot() uint64 { return s.Ev.Boot }

// Builder appends steps with a running clock and sequence numbers.
type Builder struct {
	Device string
	PID    uint32
	Comm   string
	CPU    uint32
	Start  time.Time // wall clock at Boot 0
	Steps  []Step
	now    uint64
	seq    uint64
}

// New returns a builder for device mlx5_0 at Boot 1 s, owner pid 4242
// "apmapp".
func New() *Builder {
	return &Builder{Device: "mlx5_0", PID: 4242, Comm: "apmapp",
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), now: uint64(time.Second)}
}

// After moves the clock forward.
func (b *Builder) After(d time.Duration) *Builder { b.now += uint64(d); return b }

// Now is the builder's clock, Boot nanoseconds.
func (b *Builder) Now() uint64 { return b.now }

// OnCPU sets the CPU of the next events.
func (b *Builder) OnCPU(cpu uint32) *Builder { b.CPU = cpu; return b }

// Add stamps ev (sequence, time, CPU, owner, device) and appends it.
func (b *Builder) Add(ev *event.Event) *event.Event {
	b.seq++
	ev.Seq, ev.Boot, ev.CPU = b.seq, b.now, b.CPU
	ev.Time = b.Start.Add(time.Duration(b.now))
	if ev.PID == 0 && ev.Kind != event.KindQPEvent && ev.Kind != event.KindMAD && ev.Kind != event.KindCMHandler {
		ev.PID, ev.TID, ev.Comm = b.PID, b.PID, b.Comm
	}
	if ev.Device == "" {
		ev.Device = b.Device
	}
	b.Steps = append(b.Steps, Step{Ev: ev})
	b.now += uint64(time.Microsecond) // distinct stamps, in order
	return ev
}

// Create is a successful RC QP create.
func (b *Builder) Create(qpn uint32) *event.Event {
	return b.Add(&event.Event{Kind: event.KindQPCreate, QPN: qpn,
		Life: &event.QPLife{QPType: event.QPTypeRC, Origin: event.OriginUser}})
}

// Destroy is a successful QP destroy.
func (b *Builder) Destroy(qpn uint32) *event.Event {
	return b.Add(&event.Event{Kind: event.KindQPDestroy, QPN: qpn,
		Life: &event.QPLife{QPType: event.QPTypeRC, Origin: event.OriginUser}})
}

// Modify is an ib_modify_qp_with_udata call; set fills the attributes.
func (b *Builder) Modify(qpn uint32, mask uint32, set func(*event.Modify)) *event.Event {
	md := &event.Modify{QPType: event.QPTypeRC, Origin: event.OriginUser, AttrMask: mask,
		Hook: "ib_modify_qp_with_udata"}
	if set != nil {
		set(md)
	}
	return b.Add(&event.Event{Kind: event.KindModify, QPN: qpn, Modify: md})
}

// ToState is a plain state transition.
func (b *Builder) ToState(qpn uint32, st event.QPState) *event.Event {
	return b.Modify(qpn, event.AttrState, func(m *event.Modify) { m.State = st })
}

// Connect creates an RC QP and brings it to RTS on primary. With an
// alternate, it is loaded at INIT->RTR and armed at RTR->RTS, as the CM's
// ib_cm_init_qp_attr does.
func (b *Builder) Connect(qpn uint32, primary event.Path, alt *event.Path) {
	b.Create(qpn)
	b.ToState(qpn, event.StateInit)
	mask := event.AttrState | event.AttrAV | event.AttrDestQPN
	if alt != nil {
		mask |= event.AttrAltPath
	}
	b.Modify(qpn, mask, func(m *event.Modify) {
		m.State, m.Primary, m.Alt, m.DestQPN = event.StateRTR, &primary, alt, qpn+1000
	})
	mask = event.AttrState
	if alt != nil {
		mask |= event.AttrPathMigState
	}
	b.Modify(qpn, mask, func(m *event.Modify) { m.State, m.MigState = event.StateRTS, event.MigRearm })
}

// LoadAlt is step 2: RTS->RTS with IB_QP_ALT_PATH.
func (b *Builder) LoadAlt(qpn uint32, p event.Path) *event.Event {
	return b.Modify(qpn, event.AttrAltPath, func(m *event.Modify) { m.Alt = &p })
}

// Rearm is step 3: RTS->RTS with IB_QP_PATH_MIG_STATE=REARM.
func (b *Builder) Rearm(qpn uint32) *event.Event {
	return b.Modify(qpn, event.AttrPathMigState, func(m *event.Modify) { m.MigState = event.MigRearm })
}

// Arm is RTS->RTS with IB_QP_PATH_MIG_STATE=ARMED: IBTA and rdmavt refuse
// it (EINVAL), mlx4/mlx5 pass it to the firmware, which may take it.
func (b *Builder) Arm(qpn uint32) *event.Event {
	return b.Modify(qpn, event.AttrPathMigState, func(m *event.Modify) { m.MigState = event.MigArmed })
}

// LoadAltRearm is MVAPICH2's single modify ALT_PATH|PATH_MIG_STATE=REARM.
func (b *Builder) LoadAltRearm(qpn uint32, p event.Path) *event.Event {
	return b.Modify(qpn, event.AttrAltPath|event.AttrPathMigState, func(m *event.Modify) {
		m.Alt, m.MigState = &p, event.MigRearm
	})
}

// ForceMigrate is RTS->RTS with PATH_MIG_STATE=MIGRATED: software moves the
// QP to its alternate path.
func (b *Builder) ForceMigrate(qpn uint32) *event.Event {
	return b.Modify(qpn, event.AttrPathMigState, func(m *event.Modify) { m.MigState = event.MigMigrated })
}

// Fail makes a modify (or create) return -errno.
func Fail(ev *event.Event, errno int32) *event.Event {
	switch {
	case ev.Modify != nil:
		ev.Modify.Ret = -errno
	case ev.Notify != nil:
		ev.Notify.Ret = -errno
	case ev.Life != nil:
		ev.Life.Ret = -errno
	}
	return ev
}

// QPEvent is an affiliated async event.
func (b *Builder) QPEvent(qpn uint32, t event.EventType) *event.Event {
	return b.Add(&event.Event{Kind: event.KindQPEvent, QPN: qpn,
		QP: &event.QPEvent{Type: t, QPType: event.QPTypeRC, Origin: event.OriginUser, Hook: "__ib_qp_event_handler"}})
}

// PathMig is the HCA's PATH_MIG: it moved the QP to its alternate path.
func (b *Builder) PathMig(qpn uint32) *event.Event { return b.QPEvent(qpn, event.EvPathMig) }

// PathMigErr is the HCA's PATH_MIG_ERR: migrating to the alternate failed.
func (b *Builder) PathMigErr(qpn uint32) *event.Event { return b.QPEvent(qpn, event.EvPathMigErr) }

// CommEst is COMM_EST: the first packet arrived while the QP was in RTR
// (IBTA defines it for nothing else; there is none after a migration).
func (b *Builder) CommEst(qpn uint32) *event.Event { return b.QPEvent(qpn, event.EvCommEst) }

// Notify is ib_cm_notify(cm_id, t) returning ret, for the cm_id whose local
// communication id is local, bound to qpn (0: the source did not know).
func (b *Builder) Notify(qpn uint32, t event.EventType, ret int32, local uint32) *event.Event {
	return b.Add(&event.Event{Kind: event.KindCMNotify, QPN: qpn,
		Notify: &event.CMNotify{Type: t, Ret: ret, CMID: 0xffff8880_00000000 | uint64(local), LocalID: local, RemoteID: local + 1}})
}

// LAPHandler is cm_lap_handler on a LAP addressed to our comm id.
func (b *Builder) LAPHandler(qpn uint32, ours uint32, ret int32) *event.Event {
	return b.Add(&event.Event{Kind: event.KindCMHandler, QPN: qpn,
		Handler: &event.CMHandler{AttrID: event.CMAttrLAP, Ret: ret, LocalID: ours + 1, RemoteID: ours, AltDLID: PathC.DLID}})
}

// MAD is a CM MAD on the wire; ours is this side's comm id.
func (b *Builder) MAD(dir event.MADDir, attr uint16, ours uint32) *event.Event {
	m := &event.MAD{Dir: dir, MgmtClass: event.MgmtClassCM, Method: 3, AttrID: attr, TID: uint64(b.seq + 1),
		Port: 1, MADQPN: 1}
	if dir == event.MADSend {
		m.LocalID, m.RemoteID = ours, ours+1
	} else {
		m.LocalID, m.RemoteID = ours+1, ours
	}
	return b.Add(&event.Event{Kind: event.KindMAD, QPN: 0, MAD: m})
}

// ThreeSteps are the three steps after a migration: send a LAP
// with the new alternate, load it, rearm.
func (b *Builder) ThreeSteps(qpn uint32, alt event.Path, ours uint32) {
	if ours != 0 {
		b.MAD(event.MADSend, event.CMAttrLAP, ours)
	}
	b.LoadAlt(qpn, alt)
	b.Rearm(qpn)
}

// Truth is a ground-truth reading of the QP at the current time, as a
// netlink source puts it in the stream (Seq 0, the owner in PID and Comm).
func (b *Builder) Truth(qpn uint32, mig event.MigState, st event.QPState) *event.Event {
	ev := &event.Event{Kind: event.KindTruth, Boot: b.now, Device: b.Device, QPN: qpn,
		Truth: &event.Truth{Op: event.TruthRead, Source: "netlink", QPType: event.QPTypeRC,
			State: st, HasState: true, Mig: mig, Span: uint64(time.Microsecond)}}
	b.Steps = append(b.Steps, Step{Ev: ev})
	b.now += uint64(time.Microsecond)
	return ev
}

// Gone is a ground-truth note that the QP vanished from the kernel's table.
func (b *Builder) Gone(qpn uint32) *event.Event {
	ev := &event.Event{Kind: event.KindTruth, Boot: b.now, Device: b.Device, QPN: qpn,
		Truth: &event.Truth{Op: event.TruthGone, Source: "netlink"}}
	b.Steps = append(b.Steps, Step{Ev: ev})
	b.now += uint64(time.Microsecond)
	return ev
}

// Feed hands the steps to m in slice order.
func Feed(m *apm.Model, steps []Step) {
	for _, s := range steps {
		m.Handle(s.Ev)
	}
}

// Run feeds the steps into a new model with cfg, then ends the stream
// settle past the last step (Model.Finish) so every deadline is judged, and
// returns the findings in emission order.
func Run(cfg apm.Config, steps []Step, settle time.Duration) ([]apm.Finding, *apm.Model, error) {
	var out []apm.Finding
	m, err := apm.New(cfg, func(f apm.Finding) { out = append(out, f) })
	if err != nil {
		return nil, nil, err
	}
	Feed(m, steps)
	var last uint64
	for _, s := range steps {
		last = max(last, s.Boot())
	}
	m.Finish(last + uint64(settle))
	return out, m, nil
}

// Jitter returns the steps in a plausible arrival order from per-CPU ring
// buffers: each event is given a random CPU in [0, cpus) and a random delay
// below skew, and a CPU's events keep their order. Ground-truth readings
// arrive at their time. The steps themselves are not changed apart from CPU.
func Jitter(steps []Step, cpus int, skew time.Duration, seed uint64) []Step {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	type arr struct {
		at uint64
		i  int
	}
	last := make([]uint64, cpus)
	order := make([]arr, len(steps))
	for i, s := range steps {
		at := s.Boot()
		if s.Ev.Kind != event.KindTruth {
			cpu := r.IntN(cpus)
			s.Ev.CPU = uint32(cpu)
			at = max(last[cpu], at+uint64(r.Int64N(int64(skew))))
			last[cpu] = at
		}
		order[i] = arr{at, i}
	}
	slices.SortStableFunc(order, func(a, b arr) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	out := make([]Step, len(steps))
	for j, o := range order {
		out[j] = steps[o.i]
	}
	return out
}
