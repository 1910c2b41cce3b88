package wire

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
	"time"
)

// BehindHeader, on a connection record, says how many of its publisher's
// messages were in flight (sent, not yet acknowledged) when it was sent:
// those of its batch before it. When JetStream fails one of them and
// stores later ones, the failed one is sent again and stored after them;
// so the fleet moves a host's watermark only on a record that says 0 (or
// on a heartbeat with an empty queue), never past a record still to come.
const BehindHeader = "Apmwatch-Behind"

// Conn is a connection record: one end of an RC or UC connection as its
// host sees it. The JSON field names are an interface (docs/fleet.md).
// It holds identities and APM state only, never payload data.
type Conn struct {
	Host   string `json:"host"`
	Device string `json:"device"`
	Port   uint32 `json:"port,omitempty"`
	Type   string `json:"type,omitempty"` // RC or UC
	Local  Addr   `json:"local"`
	Remote Addr   `json:"remote"`
	// Global says the connection is routed by GID (a GRH in its address
	// vector); otherwise both ends are in one subnet and pair by LID.
	Global bool   `json:"global,omitempty"`
	State  string `json:"state,omitempty"`     // QP state, as last seen
	Mig    string `json:"mig_state,omitempty"` // ARMED, REARM or MIGRATED, as last read from rdma netlink
	// MigRead is when Mig was read.
	MigRead time.Time `json:"mig_read,omitzero"`
	// Armed says the end has loaded an alternate path and armed it (or
	// rearmed it after its last migration), from its host's events.
	Armed bool `json:"armed,omitempty"`
	// APM says the end has been armed at least once: a connection whose
	// ends never used APM is not judged.
	APM bool `json:"apm,omitempty"`
	// Changed is when Armed last changed (or the end was first seen): a
	// pair's judgement is named by its ends' Changed, so it is given once.
	Changed time.Time `json:"changed"`
	Episode Episode   `json:"episode"`
	PID     uint32    `json:"pid,omitempty"`
	Comm    string    `json:"comm,omitempty"`
	// Gone says the QP was destroyed (or vanished from rdma netlink): the
	// end is forgotten.
	Gone bool `json:"gone,omitempty"`
	// At is when the host published this revision; Rev counts the
	// records of one run of its publisher, named by Run. Within a run Rev
	// orders the records (a host clock stepped back does not make them
	// stale), across runs At does.
	At  time.Time `json:"at"`
	Rev uint64    `json:"rev"`
	Run string    `json:"run,omitempty"`
}

// MaxRecordBytes bounds a record read from the stream: one is about 500
// bytes (8 migrations, a 16-character command, names of up to 64).
const MaxRecordBytes = 16 << 10

// Addr is one side's address and QPN.
type Addr struct {
	GID string `json:"gid,omitempty"` // IPv6 notation
	LID uint16 `json:"lid,omitempty"`
	// LMC is the local port's LID mask count (sysfs lid_mask_count): it
	// answers to the 2^LMC LIDs from LID. 0 on the remote side, and in
	// records of older publishers.
	LMC uint8  `json:"lmc,omitempty"`
	QPN uint32 `json:"qpn"`
}

// Episode is the current migration episode of an end: the migrations
// since its last rearm (at most maxMigrations kept) and the rearm that
// closed it, if any.
type Episode struct {
	N          uint32      `json:"n"` // migrations of this QP so far
	Migrations []time.Time `json:"migrations,omitempty"`
	Rearm      time.Time   `json:"rearm,omitzero"`
}

// MaxMigrations bounds Episode.Migrations (a flapping QP).
const MaxMigrations = 8

// Migrated returns the first migration of the current episode, or zero.
func (e Episode) Migrated() time.Time {
	if len(e.Migrations) == 0 {
		return time.Time{}
	}
	return e.Migrations[0]
}

// EndKey identifies one end of a connection fabric-wide: its address
// (a GID, or a subnet prefix and LID) and QPN. It is comparable and
// small (20 bytes), the key of the engine's table.
type EndKey struct {
	Addr [16]byte
	n    uint32 // the QPN (24 bits), and globalBit
}

// globalBit marks a key by GID; a QPN has 24 bits.
const globalBit = 1 << 31

// QPN is the key's QP number.
func (k EndKey) QPN() uint32 { return k.n &^ globalBit }

// Global reports a key by GID.
func (k EndKey) Global() bool { return k.n&globalBit != 0 }

// Valid reports whether the key names an address.
func (k EndKey) Valid() bool { return k.Addr != [16]byte{} && k.QPN() != 0 }

func (k EndKey) String() string {
	if k.Global() {
		return fmt.Sprintf("%s/%d", netip.AddrFrom16(k.Addr), k.QPN())
	}
	return fmt.Sprintf("%x:lid%d/%d", k.Addr[:8], binary.BigEndian.Uint16(k.Addr[8:10]), k.QPN())
}

// endKey builds the key of an address: the GID when the connection is
// global, else the subnet prefix (the first half of the local GID: both
// ends of a LID-routed connection share it) and the LID.
func endKey(a Addr, global bool, prefix [8]byte) EndKey {
	k := EndKey{n: a.QPN &^ globalBit}
	if global {
		k.n |= globalBit
	}
	if global {
		if ip, err := netip.ParseAddr(a.GID); err == nil && ip.Is6() {
			k.Addr = ip.As16()
		}
		return k
	}
	if a.LID == 0 {
		return k
	}
	copy(k.Addr[:8], prefix[:])
	binary.BigEndian.PutUint16(k.Addr[8:10], a.LID)
	k.Addr[15] = 1 // a LID key is never all zero, even with no prefix
	return k
}

func prefixOf(gid string) [8]byte {
	var p [8]byte
	if ip, err := netip.ParseAddr(gid); err == nil && ip.Is6() {
		b := ip.As16()
		copy(p[:], b[:8])
	}
	return p
}

// Keys returns the keys of the record's local and remote ends. A port
// answers to the 2^LMC LIDs from its base LID (the one its key holds), so
// a path's DLID is taken to its LMC range's base by the local port's LMC:
// OpenSM and UFM give every channel adapter port of a subnet one LMC, and
// the fleet pairs two ends only when their LMCs agree (TestLMCKeys).
func (c *Conn) Keys() (local, remote EndKey) {
	p := prefixOf(c.Local.GID)
	r := c.Remote
	if lmc := c.LMC(); lmc > 0 && r.LID < 0xC000 {
		r.LID &^= 1<<lmc - 1
	}
	return endKey(c.Local, c.Global, p), endKey(r, c.Global, p)
}

// LMC is the local port's LID mask count as a LID-routed connection's
// pairing uses it: 0 for a connection routed by GID, and past IBTA's 3
// bits (a hostile record).
func (c *Conn) LMC() uint8 {
	if c.Global || c.Local.LMC > 7 {
		return 0
	}
	return c.Local.LMC
}

// Partitions is the number of partitions of the connection subjects: the
// most fleet instances that share the work.
const Partitions = 64

// Partition is the connection's partition: a hash of its two ends in a
// fixed order, so both ends' records land in the same one. A record whose
// remote end is unknown is placed by its local end alone (it cannot pair).
func (c *Conn) Partition() int {
	l, r := c.Keys()
	return PartitionOf(l, r)
}

func PartitionOf(l, r EndKey) int {
	if !r.Valid() {
		r = EndKey{}
	}
	if Less(r, l) {
		l, r = r, l
	}
	h := fnv.New32a()
	h.Write(l.Addr[:])
	h.Write(binary.BigEndian.AppendUint32(nil, l.n))
	h.Write(r.Addr[:])
	h.Write(binary.BigEndian.AppendUint32(nil, r.n))
	// Fibonacci hashing: every bit of the hash reaches the partition (the
	// low bits of FNV alone follow the parity of the QPNs).
	return int(uint64(h.Sum32()) * 0x9E3779B97F4A7C15 >> 58 % Partitions)
}

func Less(a, b EndKey) bool {
	for i := range a.Addr {
		if a.Addr[i] != b.Addr[i] {
			return a.Addr[i] < b.Addr[i]
		}
	}
	return a.n < b.n
}

// MaxTracked bounds the tracker's table (hostile input: a flood of QPNs).
const MaxTracked = 1 << 20
