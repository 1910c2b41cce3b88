package hcacheck

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/uverbs"
	"golang.org/x/sys/unix"
)

// fakeHCA is a Backend simulating one two-port HCA (LIDs 1 and 2) the way
// ibsim does, in the calling goroutine: every send is one request and its
// ACK at once, and a request nobody takes exhausts its retries at once.
// Its firmware knobs are the lab's, plus misbehaviours for the negative
// cases.
type fakeHCA struct {
	armedAccept bool
	forced      string // none, inside, after
	altZero     bool
	deadPMErr   bool
	unloaded1   bool // a QP with no alternate reads alternate port 1 (mlx4's decode)

	rearmOnArmedOK  bool // REARM on ARMED returns 0
	migFromRearmOK  bool // MIGRATED on REARM returns 0 (and migrates nothing)
	commEstAfterMig bool // COMM_EST on the first packet after a migration
	swap            bool // a migration swaps the paths
	ackNoMigReq     bool // ACKs do not arm the requester
	neverArm        bool // REARM never turns ARMED
	createQPErr     error

	opened, closed bool
	pds, cqs       map[uint32]bool
	qps            map[uint32]*fqp
	next           uint32
	events         []pendingEv
	wcs            []uverbs.WC
	destroyed      []uint32
}

type pendingEv struct {
	ev uverbs.AsyncEvent
	at time.Time
}

type fqp struct {
	QP
	uh              uint64
	state           event.QPState
	mig             event.MigState
	prim, alt       path
	dest            uint32
	rtrSeen, ceNext bool
}

func newFake() *fakeHCA {
	return &fakeHCA{forced: "inside", pds: map[uint32]bool{}, cqs: map[uint32]bool{}, qps: map[uint32]*fqp{}}
}

// ibtaFake and mlx5Fake are the lab's two profiles.
func ibtaFake() *fakeHCA { return newFake() }

func mlx5Fake() *fakeHCA {
	f := newFake()
	f.armedAccept, f.forced, f.altZero, f.deadPMErr = true, "none", true, true
	return f
}

func (f *fakeHCA) Open(string) error { f.opened = true; return nil }
func (f *fakeHCA) Close() error      { f.closed = true; return nil }

func (f *fakeHCA) AllocPD() (uint32, error) { f.next++; f.pds[f.next] = true; return f.next, nil }
func (f *fakeHCA) CreateCQ(uint32) (uint32, error) {
	f.next++
	f.cqs[f.next] = true
	return f.next, nil
}

func (f *fakeHCA) CreateQP(pd, cq uint32, uh uint64) (QP, error) {
	if f.createQPErr != nil && len(f.qps) == 1 {
		return QP{}, f.createQPErr
	}
	f.next++
	q := &fqp{QP: QP{Handle: f.next, QPN: 0x100 + f.next}, uh: uh}
	f.qps[q.Handle] = q
	return q.QP, nil
}

func (f *fakeHCA) DestroyQP(h uint32) error {
	if f.qps[h] == nil {
		return unix.EINVAL
	}
	delete(f.qps, h)
	f.destroyed = append(f.destroyed, h)
	return nil
}

func (f *fakeHCA) DestroyCQ(h uint32) error {
	if !f.cqs[h] || len(f.qps) > 0 {
		return unix.EBUSY
	}
	delete(f.cqs, h)
	return nil
}

func (f *fakeHCA) DeallocPD(h uint32) error {
	if !f.pds[h] || len(f.qps) > 0 {
		return unix.EBUSY
	}
	delete(f.pds, h)
	return nil
}

func (f *fakeHCA) raise(q *fqp, t event.EventType, delay time.Duration) {
	f.events = append(f.events, pendingEv{ev: uverbs.AsyncEvent{Element: q.uh, Type: uint32(t)}, at: time.Now().Add(delay)})
}

func (f *fakeHCA) NextEvent(wait time.Duration) (uverbs.AsyncEvent, bool, error) {
	if len(f.events) == 0 {
		return uverbs.AsyncEvent{}, false, nil
	}
	e := f.events[0]
	if d := time.Until(e.at); d > 0 {
		if d > wait {
			return uverbs.AsyncEvent{}, false, nil
		}
		time.Sleep(d)
	}
	f.events = f.events[1:]
	return e.ev, true, nil
}

func (f *fakeHCA) Poll(uint32) ([]uverbs.WC, error) {
	n := min(len(f.wcs), pollBatch)
	w := f.wcs[:n:n]
	f.wcs = f.wcs[n:]
	return w, nil
}

func (f *fakeHCA) PostRecv(h uint32, _ uint64) error {
	if f.qps[h] == nil || f.qps[h].state == event.StateReset {
		return unix.EINVAL
	}
	return nil
}

func (f *fakeHCA) Query(h uint32) (uverbs.Attr, error) {
	q := f.qps[h]
	if q == nil {
		return uverbs.Attr{}, unix.EINVAL
	}
	alt := q.alt
	if alt.Port == 0 && f.unloaded1 {
		alt.Port = 1
	}
	return uverbs.Attr{State: uint8(q.state), PathMigState: uint8(q.mig), DestQPN: q.dest,
		PortNum: q.prim.Port, Dest: uverbs.Dest{DLID: q.prim.DLID, SrcPathBits: q.prim.Bits, PortNum: q.prim.Port},
		AltPortNum: alt.Port, AltDest: uverbs.Dest{DLID: alt.DLID, SrcPathBits: alt.Bits, PortNum: alt.Port}}, nil
}

func (f *fakeHCA) migrate(q *fqp) {
	old := q.prim
	q.prim = q.alt
	switch {
	case f.altZero:
		q.alt = path{}
	case f.swap:
		q.alt = old
	}
	q.mig = event.MigMigrated
	q.ceNext = f.commEstAfterMig
}

func (f *fakeHCA) Modify(m *uverbs.Modify) error {
	q := f.qps[m.Handle]
	if q == nil {
		return unix.EINVAL
	}
	forced := false
	if m.AttrMask&event.AttrPathMigState != 0 {
		switch event.MigState(m.PathMigState) {
		case event.MigArmed:
			if !f.armedAccept {
				return unix.EINVAL
			}
			q.mig = event.MigArmed
		case event.MigRearm:
			if q.mig == event.MigArmed {
				if !f.rearmOnArmedOK {
					return unix.EINVAL
				}
			} else {
				q.mig = event.MigRearm
			}
		case event.MigMigrated:
			switch q.mig {
			case event.MigRearm:
				if !f.migFromRearmOK {
					return unix.EINVAL
				}
				q.mig = event.MigMigrated
			case event.MigArmed:
				f.migrate(q)
				forced = true
			}
		}
	}
	if m.AttrMask&event.AttrAV != 0 {
		q.prim = path{Port: m.Dest.PortNum, DLID: m.Dest.DLID, Bits: m.Dest.SrcPathBits}
	}
	if m.AttrMask&event.AttrPort != 0 {
		q.prim.Port = m.PortNum
	}
	if m.AttrMask&event.AttrAltPath != 0 {
		if m.AltPortNum != m.AltDest.PortNum {
			return unix.EINVAL
		}
		q.alt = path{Port: m.AltPortNum, DLID: m.AltDest.DLID, Bits: m.AltDest.SrcPathBits}
	}
	if m.AttrMask&event.AttrDestQPN != 0 {
		q.dest = m.DestQPN
	}
	if m.AttrMask&event.AttrState != 0 {
		q.state = event.QPState(m.State)
	}
	if forced {
		switch f.forced {
		case "inside":
			f.raise(q, event.EvPathMig, 0)
		case "after":
			f.raise(q, event.EvPathMig, 5*time.Millisecond)
		}
	}
	return nil
}

// portOf is the port a DLID reaches (LIDs 1 and 2, LMC 1: 1-2 and 3-4
// would overlap, so LMC paths use LID+1 only on port 1), 0 for none.
func portOf(dlid uint16) uint8 {
	switch dlid {
	case 1:
		return 1
	case 2:
		return 2
	}
	return 0
}

func (f *fakeHCA) byQPN(n uint32) *fqp {
	for _, q := range f.qps {
		if q.QPN == n {
			return q
		}
	}
	return nil
}

// deliver carries one packet from s over its primary: the QP that took it.
func (f *fakeHCA) deliver(s *fqp) *fqp {
	dport := portOf(s.prim.DLID)
	d := f.byQPN(s.dest)
	if dport == 0 || d == nil || d.dest != s.QPN || d.state < event.StateRTR || d.state > event.StateSQD {
		return nil
	}
	slid := uint16(s.prim.Port) + uint16(s.prim.Bits)
	if d.mig == event.MigArmed && s.mig == event.MigMigrated {
		if dport != d.alt.Port || d.alt.DLID != slid {
			return nil
		}
		f.migrate(d)
		f.raise(d, event.EvPathMig, 0)
	} else {
		if dport != d.prim.Port || d.prim.DLID != slid {
			return nil
		}
		if d.mig == event.MigRearm && s.mig != event.MigMigrated && !f.neverArm {
			d.mig = event.MigArmed
		}
	}
	if (d.state == event.StateRTR && !d.rtrSeen) || d.ceNext {
		f.raise(d, event.EvCommEst, 0)
	}
	d.rtrSeen, d.ceNext = true, false
	return d
}

func (f *fakeHCA) PostSend(h uint32, wr uint64) error {
	s := f.qps[h]
	if s == nil || (s.state != event.StateRTS && s.state != event.StateErr) {
		return unix.EINVAL
	}
	if s.state == event.StateErr {
		f.wcs = append(f.wcs, uverbs.WC{WRID: wr, Status: uverbs.WCFlushErr, QPN: s.QPN})
		return nil
	}
	for try := 0; try < 2; try++ {
		if d := f.deliver(s); d != nil {
			if !f.ackNoMigReq && s.mig == event.MigRearm && d.mig != event.MigMigrated && !f.neverArm {
				s.mig = event.MigArmed
			}
			f.wcs = append(f.wcs, uverbs.WC{WRID: wr, Status: uverbs.WCSuccess, QPN: s.QPN})
			return nil
		}
		if s.mig != event.MigArmed {
			break
		}
		if f.deadPMErr && portOf(s.alt.DLID) == 0 {
			f.raise(s, event.EvPathMigErr, 0)
			break
		}
		f.migrate(s)
		f.raise(s, event.EvPathMig, 0)
	}
	s.state = event.StateErr
	f.wcs = append(f.wcs, uverbs.WC{WRID: wr, Status: uverbs.WCRetryExcErr, QPN: s.QPN})
	return nil
}

// fakeSys writes a sysfs tree: ibsim0 (InfiniBand, LIDs 1 and 2, no
// parent device), rxe0 (Ethernet), mlx5_0 (InfiniBand, driver mlx5_core),
// down0 (port 1 DOWN), nolid0 (LID 0).
func fakeSys(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	port := func(dev string, p int, ll, state, lid string) {
		d := filepath.Join(root, "class", "infiniband", dev, "ports", string(rune('0'+p)))
		must(t, os.MkdirAll(d, 0o755))
		for name, v := range map[string]string{"link_layer": ll, "state": state, "lid": lid, "lid_mask_count": "0"} {
			must(t, os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o644))
		}
	}
	port("ibsim0", 1, "InfiniBand", "4: ACTIVE", "0x1")
	port("ibsim0", 2, "InfiniBand", "4: ACTIVE", "0x2")
	port("rxe0", 1, "Ethernet", "4: ACTIVE", "0x0")
	port("mlx5_0", 1, "InfiniBand", "4: ACTIVE", "0x5")
	port("mlx5_0", 2, "InfiniBand", "4: ACTIVE", "0x6")
	port("down0", 1, "InfiniBand", "1: DOWN", "0x7")
	port("down0", 2, "InfiniBand", "4: ACTIVE", "0x8")
	port("nolid0", 1, "InfiniBand", "4: ACTIVE", "0x0")
	port("nolid0", 2, "InfiniBand", "4: ACTIVE", "0x0")
	drv := filepath.Join(root, "bus", "pci", "drivers", "mlx5_core")
	must(t, os.MkdirAll(drv, 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "class", "infiniband", "mlx5_0", "device"), 0o755))
	must(t, os.Symlink(drv, filepath.Join(root, "class", "infiniband", "mlx5_0", "device", "driver")))
	return root
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// quick is the default configuration with waits short enough for tests.
func quick(dev string) Config {
	c := DefaultConfig()
	c.Device = dev
	c.ArmWait, c.EventWait, c.FailWait = 200*time.Millisecond, 40*time.Millisecond, 200*time.Millisecond
	return c
}
