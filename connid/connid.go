// Package connid is the one rule by which two ends of an RC/UC connection
// are taken for the same connection, shared by the postmortem (recordings)
// and the fleet (connection records): the destination QPN of each is the
// QPN of the other, and a path of each (primary or alternate) leads to a
// port of the other's device. QPN equality alone never pairs: identical
// nodes hand out the same QPNs.
//
// The rule is pure: the callers say what each end's paths point at (its
// path loads) and which addresses its device's ports are known to have
// (sysfs on the publishing host, CM MADs in a recording). An end whose
// ports or paths are not known does not pair ("no path identity").
package connid

import (
	"fmt"
	"net/netip"
)

// Addr is a port address, or where a path leads: a GID when the route is
// global (GID set), else a LID. A port's address may carry both. A port's
// LID address carries its LMC (LID mask count): the port answers to the
// 2^LMC LIDs from its base LID, so a path leads to it by any of them.
type Addr struct {
	LID uint16
	LMC uint8 // a port's: 0 a single LID (a path's is always 0)
	GID [16]byte
}

// maxLMC is the largest LID mask count (IBTA: 3 bits).
const maxLMC = 7

// LIDAddr, PortLID and GIDAddr build addresses.
func LIDAddr(lid uint16) Addr { return Addr{LID: lid} }

// PortLID is the LID address of a port with base LID lid and LID mask
// count lmc (past 7: 0, as sysfs never gives).
func PortLID(lid uint16, lmc uint8) Addr {
	if lmc > maxLMC {
		lmc = 0
	}
	return Addr{LID: lid, LMC: lmc}
}
func GIDAddr(gid [16]byte) Addr { return Addr{GID: gid} }
func (a Addr) global() bool     { return a.GID != [16]byte{} }
func (a Addr) Valid() bool      { return a.global() || usableLID(a.LID) }
func usableLID(l uint16) bool   { return l != 0 && l < 0xC000 } // 0 none, >= 0xC000 multicast and permissive

func (a Addr) String() string {
	if a.global() {
		return netip.AddrFrom16(a.GID).String()
	}
	if a.LMC != 0 {
		return fmt.Sprintf("lid 0x%x-0x%x", a.LID, a.lastLID())
	}
	return fmt.Sprintf("lid 0x%x", a.LID)
}

// lastLID is the last LID of a port's LMC range (its base LID when LMC is
// 0), within the unicast LIDs.
func (a Addr) lastLID() uint16 {
	last := uint32(a.LID) + 1<<a.LMC - 1
	return uint16(min(last, 0xBFFF))
}

// Leads reports whether a path to `to` reaches the port with address
// port: a global path by GID (its DLID may be a router's), a local one
// by LID, any LID of the port's LMC range (a path's DLID is the base LID
// plus the path bits the peer chose).
func (to Addr) Leads(port Addr) bool {
	if to.global() {
		return to.GID == port.GID
	}
	return usableLID(to.LID) && usableLID(port.LID) && to.LID >= port.LID && to.LID <= port.lastLID()
}

// End is one end as a recording or a record knows it.
type End struct {
	Name    string // for the reason: "host-a mlx5_0/100"
	QPN     uint32
	DestQPN uint32 // 0: not connected (or not seen connecting)
	Paths   []Addr // where its primary and alternate paths lead
	Ports   []Addr // addresses of its device's ports, as known (nil: unknown)
}

// Reasons an end pair does not pair; Match's second result begins with one.
const (
	WhyNotConnected = "not connected" // a destination QPN is unknown
	WhyQPN          = "QPNs do not point at each other"
	WhyNoIdentity   = "no path identity" // paths or port addresses unknown
	WhyElsewhere    = "paths lead elsewhere"
)

// Match applies the rule to a and b. It returns "" when they are the two
// ends of one connection, else why not (one of the Why constants, with
// detail).
func Match(a, b End) string {
	switch {
	case a.DestQPN == 0 || b.DestQPN == 0:
		return WhyNotConnected
	case a.DestQPN != b.QPN || b.DestQPN != a.QPN:
		return fmt.Sprintf("%s: %s's destination is QPN %d, %s's is %d", WhyQPN, a.Name, a.DestQPN, b.Name, b.DestQPN)
	}
	for _, d := range [2][2]*End{{&a, &b}, {&b, &a}} {
		x, y := d[0], d[1]
		if !anyValid(x.Paths) {
			return fmt.Sprintf("%s: %s's paths were not seen loaded", WhyNoIdentity, x.Name)
		}
		if !anyValid(y.Ports) {
			return fmt.Sprintf("%s: no address of %s's ports is known", WhyNoIdentity, y.Name)
		}
		if !leadsAny(x.Paths, y.Ports) {
			return fmt.Sprintf("%s: %s's paths (%s) lead to none of %s's ports (%s)", WhyElsewhere, x.Name, list(x.Paths), y.Name, list(y.Ports))
		}
	}
	return ""
}

func anyValid(as []Addr) bool {
	for _, a := range as {
		if a.Valid() {
			return true
		}
	}
	return false
}

func leadsAny(paths, ports []Addr) bool {
	for _, p := range paths {
		for _, q := range ports {
			if p.Leads(q) {
				return true
			}
		}
	}
	return false
}

func list(as []Addr) string {
	s := ""
	for i, a := range as {
		if !a.Valid() {
			continue
		}
		if i > 0 && s != "" {
			s += ", "
		}
		s += a.String()
	}
	return s
}

// Add appends a to as unless it holds it, keeping at most max addresses
// (the first ones: a QP reloads few paths).
func Add(as []Addr, a Addr, max int) []Addr {
	if !a.Valid() {
		return as
	}
	for _, b := range as {
		if b == a {
			return as
		}
	}
	if len(as) >= max {
		return as
	}
	return append(as, a)
}
