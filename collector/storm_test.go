package collector

import (
	"time"
	"unsafe"

	"github.com/apmwatch/apmwatch/event"
)

// A port-failure storm as the probes write it to the ring buffer: the
// corpus of the reader's benchmark (storm_bench_test.go). One round, built
// deterministically:
//
//   - setup, over 200 ms: every QP is created, taken to INIT, to RTR with a
//     primary path on port 1 and an alternate on port 2, and to RTS with
//     PATH_MIG_STATE=REARM; a quarter of them are CM-managed (REQ sent with
//     the QPN, REP received, RTU sent);
//   - a reading of every QP (rdma netlink: RTS, ARMED) at 1 s;
//   - at 2 s port 1 fails on both devices: PORT_ERR, then every QP
//     migrates within 20 ms (PATH_MIG from ib_core and the mlx5 driver's
//     raw copy); CM QPs get ib_cm_notify(PATH_MIG) and a LAP exchange (sent
//     and APR received, or received, handled and APR sent); the CM QPs and
//     two thirds of the rest load a new alternate and rearm
//     (ALT_PATH|PATH_MIG_STATE) within 100 ms, a quarter of all QPs never
//     rearms;
//   - readings at 3 s (ARMED or MIGRATED), PORT_ACTIVE at 4.5 s, readings
//     at 5 s, every QP destroyed at 6 s.
//
// Readings are not ring records: the reconcile loop merges them into the
// stream already decoded, and so does the benchmark.

const (
	stormDevs  = 2
	stormRound = 7 * time.Second
)

// stormItem is one input of the stream: a raw ring record, or a reading.
type stormItem struct {
	raw   []byte
	truth *event.Event
}

type stormCorpus struct {
	items      []stormItem
	records    int // ring records among items
	neverRearm int // QPs left unrearmed: one missed-rearm each per round
	bytes      int // bytes of ring records
}

var stormDevNames = [stormDevs]string{"mlx5_0", "mlx5_1"}

// stormDecoder knows the hooks of a Mellanox host.
func stormDecoder() *decoder {
	return &decoder{offset: time.Duration(1_790_000_000) * time.Second, names: map[uint64]string{
		0xffffffffc0a01000: "ib_modify_qp_with_udata", 0xffffffffc0a02000: "ib_modify_qp",
		0xffffffffc0a03000: "__ib_qp_event_handler", 0xffffffffc0b01000: "mlx5_ib_qp_event",
		0xffffffffc0c01000: "cm_lap_handler", 0xffffffffc0c02000: "cm_apr_handler"},
		devs: &devNames{names: map[uint32]string{1: stormDevNames[0], 2: stormDevNames[1]}, tried: map[uint32]time.Time{}}}
}

type stormGen struct {
	c     stormCorpus
	qpns  []uint32
	boot  uint64
	names map[string]uint64 // hook name -> function address
}

func stormQP(i int) (dev int, cm bool, rearms bool) {
	dev = i % stormDevs
	cm = i%4 == 1
	rearms = cm || i%4 != 3
	return
}

func (g *stormGen) owner(i int) (comm string, pid uint32) {
	if _, cm, _ := stormQP(i); cm {
		return "nfsd", 0x300 + uint32(i%2)
	}
	ranks := [...]string{"mpi_rank_0", "mpi_rank_1", "mpi_rank_2", "mpi_rank_3", "osu_bw", "ib_write_bw", "lustre_ost", "mvapich2"}
	return ranks[i%len(ranks)], 4000 + uint32(i%len(ranks))
}

func (g *stormGen) rec(kind uint8, i int) apmApmRecord {
	var r apmApmRecord
	r.Kind = kind
	r.BootNs = g.boot
	r.Cpu = uint32(i % 2)
	comm, pid := g.owner(i)
	r.Pid, r.Tid = pid, pid+uint32(i%3)
	setStr(r.Comm[:], comm)
	dev, cm, _ := stormQP(i)
	r.DevIndex = uint32(dev) + 1 // the index the device's name came with
	r.Qpn = g.qpns[i]
	if cm {
		r.Flags = flagKernel | flagDev
	} else {
		r.Flags = flagUser | flagDev
		r.Uhandle, r.UserHandle = uint32(i), 0x5555_0000_0000+uint64(i)*0x100
	}
	r.QpType = uint8(event.QPTypeRC)
	return r
}

func (g *stormGen) add(r *apmApmRecord) {
	b := append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(r)), recordSize)...)
	g.c.items = append(g.c.items, stormItem{raw: b})
	g.c.records++
	g.c.bytes += len(b)
}

func stormPath(port uint32, dlid uint16, alt bool) apmApmPath {
	p := apmApmPath{Port: port, Dlid: dlid}
	if alt {
		p.Timeout = 14
	}
	return p
}

func (g *stormGen) modify(i int, mask uint32, fill func(*apmApmRecord)) {
	r := g.rec(1, i)
	r.FuncIp = g.names["ib_modify_qp_with_udata"]
	if r.Flags&flagKernel != 0 {
		r.FuncIp = g.names["ib_modify_qp"]
	}
	r.AttrMask = mask
	fill(&r)
	g.add(&r)
}

func (g *stormGen) mad(i int, dir uint8, attr uint16, qpn uint32) {
	r := g.rec(6, i)
	r.Qpn = qpn
	r.Dir, r.MgmtClass, r.Method, r.AttrId = dir, event.MgmtClassCM, 3, attr
	r.Obj = 0x5000_0000 + uint64(i)<<8 + uint64(attr)
	r.Port, r.MadQpn = 1, 1
	local, remote := 0x1000+uint32(i), 0x8000+uint32(i)
	if dir == uint8(event.MADSend) {
		r.LocalId, r.RemoteId = local, remote
	} else {
		r.LocalId, r.RemoteId = remote, local
	}
	r.Flags = flagDev
	g.add(&r)
}

func (g *stormGen) reading(i int, mig event.MigState) {
	dev, cm, _ := stormQP(i)
	comm, pid := g.owner(i)
	e := &event.Event{Kind: event.KindTruth, Boot: g.boot, PID: pid, TID: pid, Comm: comm,
		Device: stormDevNames[dev], QPN: g.qpns[i],
		Truth: &event.Truth{Op: event.TruthRead, Source: "netlink", QPType: event.QPTypeRC, Origin: event.OriginUser,
			State: event.StateRTS, HasState: true, Mig: mig, CM: cm, Span: uint64(5 * time.Millisecond)}}
	if cm {
		e.PID, e.TID, e.Truth.Origin = 0, 0, event.OriginKernel
	}
	g.c.items = append(g.c.items, stormItem{truth: e})
}

// step moves the clock on by d.
func (g *stormGen) step(d time.Duration) { g.boot += uint64(d) }

func (g *stormGen) at(t time.Duration) { g.boot = uint64(t) }

// newStormCorpus builds one round of the storm over qps QPs. Boot stamps
// start at 0; the benchmark adds the round's offset.
func newStormCorpus(qps int, dec *decoder) stormCorpus {
	g := &stormGen{names: map[string]uint64{}, qpns: make([]uint32, qps)}
	for addr, n := range dec.names {
		g.names[n] = addr
	}
	for i := range g.qpns {
		g.qpns[i] = 0x100 + uint32(i)*7 // the HCA's QPNs are not dense
	}
	perQP := 200 * time.Millisecond / time.Duration(qps*8)
	g.at(time.Millisecond)
	for i := range qps {
		_, cm, _ := stormQP(i)
		r := g.rec(7, i)
		g.add(&r)
		g.step(perQP)
		if cm {
			g.mad(i, uint8(event.MADSend), event.CMAttrREQ, g.qpns[i])
			g.step(perQP)
			g.mad(i, uint8(event.MADRecv), event.CMAttrREP, 0)
			g.step(perQP)
		}
		g.modify(i, event.AttrState|event.AttrPKeyIndex|event.AttrPort|event.AttrAccessFlags, func(r *apmApmRecord) {
			r.State = uint8(event.StateInit)
		})
		g.step(perQP)
		g.modify(i, event.AttrState|event.AttrAV|event.AttrPathMTU|event.AttrDestQPN|event.AttrRQPSN|event.AttrAltPath|
			event.AttrMinRNRTimer|1<<17, func(r *apmApmRecord) {
			r.State = uint8(event.StateRTR)
			r.DestQpn = 0x9000 + uint32(i)
			r.Flags |= flagHasPrimary | flagHasAlt
			r.Primary = stormPath(1, uint16(0x10+i%64), false)
			r.Alt = stormPath(2, uint16(0x80+i%64), true)
		})
		g.step(perQP)
		if cm {
			g.mad(i, uint8(event.MADSend), event.CMAttrRTU, 0)
			g.step(perQP)
		}
		g.modify(i, event.AttrState|event.AttrSQPSN|event.AttrTimeout|event.AttrRetryCnt|event.AttrRNRRetry|
			1<<13|event.AttrPathMigState, func(r *apmApmRecord) {
			r.State, r.MigState = uint8(event.StateRTS), uint8(event.MigRearm)
		})
		g.step(perQP)
	}
	g.at(time.Second)
	for i := range qps {
		g.reading(i, event.MigArmed)
	}
	// Port 1 fails on both devices.
	g.at(2 * time.Second)
	for d := range stormDevs {
		g.portEvent(d, event.EvPortErr)
		g.step(10 * time.Microsecond)
	}
	perMig := 20 * time.Millisecond / time.Duration(qps*2)
	for i := range qps {
		_, cm, _ := stormQP(i)
		raw := g.rec(2, i)
		raw.Flags, raw.EvType, raw.QpType = flagRawEvent, 0x01, 0
		raw.DevIndex = 0
		raw.FuncIp = g.names["mlx5_ib_qp_event"]
		g.add(&raw)
		g.step(perMig)
		r := g.rec(2, i)
		r.EvType = uint8(event.EvPathMig)
		r.FuncIp = g.names["__ib_qp_event_handler"]
		g.add(&r)
		g.step(perMig)
		if cm {
			n := g.rec(4, i)
			n.EvType, n.Obj, n.LocalId, n.RemoteId, n.State, n.MigState = uint8(event.EvPathMig),
				0xffff_8880_0000_0000+uint64(i)<<10, 0x1000+uint32(i), 0x8000+uint32(i), 10, 1
			g.add(&n)
		}
	}
	// The CM exchanges and the owners' rearms.
	g.at(2*time.Second + 25*time.Millisecond)
	perRearm := 100 * time.Millisecond / time.Duration(qps*3)
	for i := range qps {
		_, cm, rearms := stormQP(i)
		if cm {
			if i%8 == 1 {
				g.mad(i, uint8(event.MADSend), event.CMAttrLAP, 0)
				g.step(perRearm)
				g.mad(i, uint8(event.MADRecv), event.CMAttrAPR, 0)
			} else {
				g.mad(i, uint8(event.MADRecv), event.CMAttrLAP, 0)
				h := g.rec(5, i)
				h.Qpn, h.AttrId, h.LocalId, h.RemoteId, h.AltDlid = 0, event.CMAttrLAP, 0x8000+uint32(i), 0x1000+uint32(i), 0x40
				h.FuncIp = g.names["cm_lap_handler"]
				g.add(&h)
				g.mad(i, uint8(event.MADSend), event.CMAttrAPR, 0)
			}
			g.step(perRearm)
		}
		if rearms {
			g.modify(i, event.AttrAltPath|event.AttrPathMigState, func(r *apmApmRecord) {
				r.MigState = uint8(event.MigRearm)
				r.Flags |= flagHasAlt
				r.Alt = stormPath(2, uint16(0xc0+i%64), true)
			})
		} else {
			g.c.neverRearm++
		}
		g.step(perRearm)
	}
	g.at(3 * time.Second)
	g.readingsAfter(qps)
	g.at(4500 * time.Millisecond)
	for d := range stormDevs {
		g.portEvent(d, event.EvPortActive)
	}
	g.at(5 * time.Second)
	g.readingsAfter(qps)
	g.at(6 * time.Second)
	for i := range qps {
		r := g.rec(8, i)
		g.add(&r)
		g.step(perQP)
	}
	return g.c
}

// portEvent is port 1 of device d changing state, raised by a kworker.
func (g *stormGen) portEvent(d int, ev event.EventType) {
	r := g.rec(3, d)
	r.Qpn, r.EvType, r.Port, r.Flags = 0, uint8(ev), 1, flagDev
	r.DevIndex = uint32(d) + 1
	r.Comm = [16]int8{}
	setStr(r.Comm[:], "kworker/u16:1")
	r.Pid, r.Tid = 0, 0
	g.add(&r)
}

// readingsAfter reads every QP after the migration: ARMED where the owner
// rearmed, MIGRATED where it never does.
func (g *stormGen) readingsAfter(qps int) {
	for i := range qps {
		mig := event.MigArmed
		if _, _, rearms := stormQP(i); !rearms {
			mig = event.MigMigrated
		}
		g.reading(i, mig)
	}
}
