package rdmanl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// CMID is one rdma_cm id (`rdma resource show cm_id`). A cm_id with a QP
// (LQPN != 0) tells that the QP is driven by the CM, while that QP is the
// generation it was bound to: Feeder marks the QP's readings (Truth.CM).
type CMID struct {
	DevIndex uint32         `json:"ifindex"`
	Device   string         `json:"ifname"`
	Port     uint32         `json:"port,omitempty"`
	LQPN     uint32         `json:"lqpn,omitempty"` // 0: no QP bound
	QPType   uint8          `json:"qp-type,omitempty"`
	PS       uint32         `json:"ps"`    // port space (RDMA_PS_TCP 0x106, ...)
	State    uint8          `json:"state"` // enum rdma_cm_state
	Src      netip.AddrPort `json:"src-addr,omitzero"`
	Dst      netip.AddrPort `json:"dst-addr,omitzero"`
	ID       uint32         `json:"cm-idn"`
	PID      uint32         `json:"pid,omitempty"`
	Comm     string         `json:"comm,omitempty"`
	Kernel   bool           `json:"-"`
}

// More numbers from include/uapi/rdma/rdma_netlink.h and nldev.c's
// fill_res_cm_id_entry.
const (
	cmdResCMIDGet   = 11 // RDMA_NLDEV_CMD_RES_CM_ID_GET
	attrResCMID     = 30 // nested table
	attrResCMIDEnt  = 31 // nested
	attrResPS       = 32 // u32
	attrResSrcAddr  = 33 // __kernel_sockaddr_storage
	attrResDstAddr  = 34 // __kernel_sockaddr_storage
	attrResCMIDN    = 63 // u32, RDMA_NLDEV_ATTR_RES_CM_IDN
	afInet, afInet6 = 2, 10
)

// sockaddr decodes the start of a __kernel_sockaddr_storage (port in
// network order).
func sockaddr(d []byte) netip.AddrPort {
	if len(d) < 2 {
		return netip.AddrPort{}
	}
	switch binary.NativeEndian.Uint16(d[0:2]) {
	case afInet:
		if len(d) >= 8 {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(d[4:8])), binary.BigEndian.Uint16(d[2:4]))
		}
	case afInet6:
		if len(d) >= 24 {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(d[8:24])), binary.BigEndian.Uint16(d[2:4]))
		}
	}
	return netip.AddrPort{}
}

// parseCMIDs decodes one RDMA_NLDEV_CMD_RES_CM_ID_GET answer.
func parseCMIDs(payload []byte) ([]CMID, error) {
	return parseTable(payload, "cm_id", attrResCMID, attrResCMIDEnt, parseCMID, func(c *CMID, d Device) {
		c.DevIndex, c.Device = d.Index, d.Name
	})
}

func parseCMID(entry []byte) (CMID, error) {
	var c CMID
	seen := false
	err := forAttrs(entry, func(typ uint16, data []byte) error {
		var err error
		switch typ {
		case attrPortIndex:
			c.Port, err = u32(data)
		case attrResLQPN:
			c.LQPN, err = u32(data)
		case attrResType:
			c.QPType, err = u8(data)
		case attrResPS:
			c.PS, err = u32(data)
			seen = true
		case attrResState:
			c.State, err = u8(data)
		case attrResSrcAddr:
			c.Src = sockaddr(data)
		case attrResDstAddr:
			c.Dst = sockaddr(data)
		case attrResCMIDN:
			c.ID, err = u32(data)
		case attrResPID:
			c.PID, err = u32(data)
		case attrResKernName:
			c.Comm, c.Kernel = str(data), true
		}
		if err != nil {
			return fmt.Errorf("attribute %d: %w", typ, err)
		}
		return nil
	})
	if err == nil && !seen {
		err = errors.New("cm_id entry without port space")
	}
	return c, err
}
