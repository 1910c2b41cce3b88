package postmortem

import (
	"time"

	"github.com/apmwatch/apmwatch/connid"
	"github.com/apmwatch/apmwatch/event"
)

// Bounds of the identity evidence kept for pairing.
const (
	maxDests       = 4    // path targets (primary and alternate DLIDs or DGIDs) per QP history
	maxPortAddrs   = 16   // addresses per device
	maxPortDevices = 1024 // devices with addresses, per recording
	maxUnpaired    = 1000 // unpaired candidates listed in a report (all are counted)
)

// Unpaired is a QP whose destination QPN names a recorded QP that names it
// back, but whose identity the evidence does not confirm (connid.Match):
// the two are not judged as a connection.
type Unpaired struct {
	A   string `json:"a"`
	B   string `json:"b"`
	Why string `json:"why"`
}

// devKey names a device across the recordings: its host and name (two
// recordings of one host see the same devices; identical nodes have the
// same device names on different hosts).
func devKey(s *stream, device string) string {
	host := s.hdr.Meta.Host
	if host == "" {
		host = s.label
	}
	return host + "\x00" + device
}

// pathAddr is where a loaded path leads.
func pathAddr(p *event.Path) connid.Addr {
	if p.IsGlobal {
		return connid.GIDAddr(p.DGID)
	}
	return connid.LIDAddr(p.DLID)
}

// portAddr files the address a MAD proves for its device's port: the SLID
// of one it sent, the DLID of one it received (the LRH's addresses on the
// port it used).
func (s *stream) portAddr(e *event.Event) {
	if e.MAD == nil || e.Device == "" {
		return
	}
	lid := e.MAD.SLID
	if e.MAD.Dir == event.MADRecv {
		lid = e.MAD.DLID
	}
	if s.ports == nil {
		s.ports = map[string][]connid.Addr{}
	}
	if as, ok := s.ports[e.Device]; ok || len(s.ports) < maxPortDevices {
		s.ports[e.Device] = connid.Add(as, connid.LIDAddr(lid), maxPortAddrs)
	}
}

// portsOf gathers the port addresses every recording proves, by device:
// the ports its header lists (sysfs when it started) and those its CM MADs
// show.
func portsOf(ss []*stream) map[string][]connid.Addr {
	out := map[string][]connid.Addr{}
	for _, s := range ss {
		for _, p := range s.hdr.Meta.Ports {
			k := devKey(s, p.Device)
			out[k] = connid.Add(out[k], connid.PortLID(p.LID, p.LMC), maxPortAddrs)
			for _, g := range p.GIDs {
				out[k] = connid.Add(out[k], connid.GIDAddr(g), maxPortAddrs)
			}
		}
		for d, as := range s.ports {
			k := devKey(s, d)
			for _, a := range as {
				out[k] = connid.Add(out[k], a, maxPortAddrs)
			}
		}
	}
	return out
}

func (h *hist) end(ports map[string][]connid.Addr) connid.End {
	return connid.End{Name: h.name(), QPN: h.qpn, DestQPN: h.destQPN, Paths: h.dests, Ports: ports[devKey(h.s, h.device)]}
}

// sameQP reports two histories of one QP: the same device of one host
// (two recordings of one host may both hold it).
func sameQP(a, b *hist) bool {
	return a == b || a.qpn == b.qpn && devKey(a.s, a.device) == devKey(b.s, b.device)
}

// pairUp pairs the histories that are the two ends of one connection by
// the identity rule (connid.Match): destination QPNs both ways and a path
// of each leading to a port of the other's device, the ports' addresses
// as the recordings prove them (their headers, CM MADs). Lifetimes must overlap; the best
// overlap wins. Candidates the evidence does not confirm are returned as
// unpaired, with why, with the count of them all.
func pairUp(ss []*stream) ([]*pairing, []Unpaired, int) {
	ports := portsOf(ss)
	byQPN := map[uint32][]*hist{}
	var all []*hist
	for _, s := range ss {
		for _, h := range s.h.all {
			if h.destQPN != 0 {
				byQPN[h.qpn] = append(byQPN[h.qpn], h)
				all = append(all, h)
			}
		}
	}
	type refusal struct {
		a, b *hist
		why  string
	}
	var refused []refusal
	var out []*pairing
	for _, a := range all {
		if a.peer != nil {
			continue
		}
		var best, other *hist
		var bestOv time.Duration
		why := ""
		cands := byQPN[a.destQPN]
		if len(cands) > maxPeerCandidates { // a QPN of thousands of generations: the latest ones
			cands = cands[len(cands)-maxPeerCandidates:]
		}
		for _, b := range cands {
			if b.peer != nil || b.destQPN != a.qpn || sameQP(a, b) {
				continue
			}
			ov := overlap(a, b)
			if ov <= -overlapSlack {
				continue
			}
			if w := connid.Match(a.end(ports), b.end(ports)); w != "" {
				if other == nil {
					other, why = b, w
				}
				continue
			}
			if best == nil || ov > bestOv {
				best, bestOv = b, ov
			}
		}
		switch {
		case best != nil:
			a.peer, best.peer = best, a
			out = append(out, &pairing{a: a, b: best})
		case other != nil:
			refused = append(refused, refusal{a, other, why})
		}
	}
	var unpaired []Unpaired
	n := 0
	seen := map[[2]*hist]bool{}
	for _, r := range refused {
		if r.a.peer != nil || seen[[2]*hist{r.b, r.a}] {
			continue // paired after all, or listed from the other end
		}
		seen[[2]*hist{r.a, r.b}] = true
		n++
		if len(unpaired) < maxUnpaired {
			unpaired = append(unpaired, Unpaired{A: r.a.id(), B: r.b.id(), Why: r.why})
		}
	}
	laps := indexLAPs(ss)
	for _, p := range out {
		p.laps = laps.of(p.a, p.b)
	}
	return out, unpaired, n
}
