package postmortem

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/recording"
)

// t0 is the wall clock at Boot 0 of the synthetic hosts.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newHost is a synthetic host whose wall clock at Boot 0 is t0 plus skew.
func newHost(skew time.Duration) *apmtest.Builder {
	b := apmtest.New()
	b.Start = t0.Add(skew)
	return b
}

// connect brings qpn to RTS towards dest and arms it, as lab-pair does.
func connect(b *apmtest.Builder, qpn, dest uint32, dlid uint16) {
	b.Create(qpn)
	b.ToState(qpn, event.StateInit)
	b.Modify(qpn, event.AttrState|event.AttrAV|event.AttrDestQPN, func(m *event.Modify) {
		m.State, m.DestQPN = event.StateRTR, dest
		m.Primary = &event.Path{Port: 1, DLID: dlid}
	})
	b.Modify(qpn, event.AttrState|event.AttrAltPath|event.AttrPathMigState, func(m *event.Modify) {
		m.State, m.MigState = event.StateRTS, event.MigRearm
		m.Alt = &event.Path{Port: 2, DLID: dlid + 1}
	})
}

// ownLIDs proves the LIDs of the builder's device's ports (1, 2, ...)
// as a recording does: the SLID of a CM MAD (a REQ) it sent from each.
func ownLIDs(b *apmtest.Builder, lids ...uint16) {
	for i, l := range lids {
		b.Add(&event.Event{Kind: event.KindMAD, MAD: &event.MAD{Dir: event.MADSend, MgmtClass: event.MgmtClassCM,
			Method: 3, AttrID: event.CMAttrREQ, TID: 0xC0DE0000 + uint64(l), SLID: l, DLID: 0xffff, Port: uint32(i + 1), MADQPN: 1}})
	}
}

// cmMAD is a CM MAD as both ends see it on the wire: local is the
// sender's comm id, remote the receiver's.
func cmMAD(b *apmtest.Builder, dir event.MADDir, attr uint16, tid uint64, local, remote uint32) {
	b.Add(&event.Event{Kind: event.KindMAD, MAD: &event.MAD{Dir: dir, MgmtClass: event.MgmtClassCM,
		Method: 3, AttrID: attr, TID: tid, Port: 1, MADQPN: 1, LocalID: local, RemoteID: remote}})
}

// write records the builder's events as host's recording name in dir and
// sets the file's modification time to Boot `end` of that host.
func write(t *testing.T, dir, name, host string, b *apmtest.Builder, end uint64) string {
	t.Helper()
	return writeStats(t, dir, name, host, b, end)
}

// writeStats is write with stats records placed among the events by their
// At (each written before the first event after it); a stats record's
// counters start at the one lost event write puts before the steps.
func writeStats(t *testing.T, dir, name, host string, b *apmtest.Builder, end uint64, stats ...event.Stats) string {
	t.Helper()
	return writePorts(t, dir, name, host, nil, b, end, stats...)
}

// writePorts is writeStats with the port addresses its header lists
// (sysfs when the recording started).
func writePorts(t *testing.T, dir, name, host string, ports []event.PortAddr, b *apmtest.Builder, end uint64, stats ...event.Stats) string {
	t.Helper()
	path := filepath.Join(dir, name)
	meta := event.Meta{Host: host, Kernel: "6.12.0-test", BootOffset: time.Duration(b.Start.UnixNano()), Version: "test",
		Hooks: []event.Hook{{Name: "cm_apr_handler", Module: "ib_cm", Method: event.HookMissing}}, Ports: ports}
	w, err := recording.Create(path, meta, recording.Options{FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	// one event lost before the first (in time) of the steps: counted, and
	// overlapping no finding's window
	if err := w.WriteStats(event.Stats{Lost: 1, LostPerCPU: []uint64{1}, At: 1}); err != nil {
		t.Fatal(err)
	}
	for _, s := range b.Steps {
		for len(stats) > 0 && s.Ev != nil && stats[0].At <= s.Ev.Boot {
			if err := w.WriteStats(stats[0]); err != nil {
				t.Fatal(err)
			}
			stats = stats[1:]
		}
		if s.Ev != nil {
			if err := w.Write(s.Ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.WriteStats(event.Stats{Events: uint64(len(b.Steps)), Lost: 1, LostPerCPU: []uint64{1}, At: end}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mt := b.Start.Add(time.Duration(end))
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
	return path
}

// twoHosts is lab-pair's connection on two hosts: host-a QP 100 <-> host-b
// QP 200, both migrate at Boot 2 s; rearmA/rearmB say who rearms.
// host-b's wall clock is skew ahead. Recordings end at endA and endB
// (seconds of Boot).
func twoHosts(t *testing.T, rearmA, rearmB bool, skew time.Duration, endA, endB float64) (string, string) {
	a, b := newHost(0), newHost(skew)
	connect(a, 100, 200, 0x11)
	connect(b, 200, 100, 0x21)
	a.After(time.Second)
	b.After(time.Second)
	// the requester (a) migrates; the responder (b) follows 300 us later
	a.PathMig(100)
	b.After(300 * time.Microsecond).PathMig(200)
	if rearmA {
		a.Notify(100, event.EvPathMig, 0, 0x1000)
		// a sends a LAP to b (tid 7), b answers with an APR
		cmMAD(a.After(time.Millisecond), event.MADSend, event.CMAttrLAP, 7, 0x1000, 0x2000)
		cmMAD(b.After(time.Millisecond), event.MADRecv, event.CMAttrLAP, 7, 0x1000, 0x2000)
		b.LAPHandler(200, 0x2000, 0)
		cmMAD(b.After(100*time.Microsecond), event.MADSend, event.CMAttrAPR, 7, 0x2000, 0x1000)
		cmMAD(a.After(2*time.Millisecond), event.MADRecv, event.CMAttrAPR, 7, 0x2000, 0x1000)
		a.LoadAlt(100, event.Path{Port: 1, DLID: 0x13})
		a.Rearm(100)
	}
	if rearmB {
		b.After(5*time.Millisecond).Notify(200, event.EvPathMig, 0, 0x2000)
		b.LoadAlt(200, event.Path{Port: 1, DLID: 0x23})
		b.Rearm(200)
	}
	// the CM's MADs prove each host's port LIDs (the other's paths lead there)
	ownLIDs(a.After(time.Millisecond), 0x21, 0x22)
	ownLIDs(b.After(time.Millisecond), 0x11, 0x12)
	dir := t.TempDir()
	pa := write(t, dir, "a.rec", "host-a", a, uint64(endA*float64(time.Second)))
	pb := write(t, dir, "b.rec", "host-b", b, uint64(endB*float64(time.Second)))
	return pa, pb
}

func run(t *testing.T, o Options, paths ...string) *Report {
	t.Helper()
	r, err := Run(context.Background(), paths, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func kinds(r *Report) map[string]int {
	out := map[string]int{}
	for _, f := range r.Findings {
		out[string(f.Kind)+"@"+f.Side]++
	}
	return out
}
